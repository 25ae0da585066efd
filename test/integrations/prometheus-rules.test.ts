import {readFile} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'
import {execa} from 'execa'
import yaml from 'js-yaml'

import {REPO} from '../helpers/cli.js'
import {testNeeding} from '../helpers/packages.js'

/*
 * Issue 23, item 5: the recording and alerting rules in integrations/prometheus/ pass
 * `promtool check rules`, and their unit tests (`promtool test rules`: every alert firing
 * and not firing, the recording rules counting) pass against Debian's promtool.
 */

const DIR = join(REPO, 'integrations/prometheus')
const RULES = 'localpuppet.rules.yml'
const TESTS = 'localpuppet.rules.test.yml'

const promtoolTest = await testNeeding(['prometheus'])

type Rule = {alert?: string; record?: string; expr: string; labels?: Record<string, string>; annotations?: Record<string, string>}
type UnitTests = {rule_files: string[]; tests: Array<{alert_rule_test?: Array<{alertname: string; exp_alerts?: unknown[]}>; promql_expr_test?: Array<{expr: string}>}>}

const load = async <T>(name: string) => yaml.load(await readFile(join(DIR, name), 'utf8')) as T

promtoolTest('promtool check rules accepts the rules', async (t) => {
  const result = await execa('promtool', ['check', 'rules', RULES], {cwd: DIR, reject: false})
  t.is(result.exitCode, 0, result.stdout + result.stderr)
  t.regex(result.stdout, /SUCCESS: \d+ rules found/)
})

promtoolTest("promtool test rules passes the rules' unit tests", async (t) => {
  const result = await execa('promtool', ['test', 'rules', TESTS], {cwd: DIR, reject: false})
  t.is(result.exitCode, 0, result.stdout + result.stderr)
  t.regex(result.stdout, /SUCCESS/)
})

test('every alert is labelled, annotated, documented and tested firing and not firing; every recording tested', async (t) => {
  const rules = (await load<{groups: Array<{rules: Rule[]}>}>(RULES)).groups.flatMap((group) => group.rules)
  const unit = await load<UnitTests>(TESTS)
  const readme = await readFile(join(DIR, 'README.md'), 'utf8')
  t.deepEqual(unit.rule_files, [RULES])
  const alertTests = unit.tests.flatMap((suite) => suite.alert_rule_test ?? [])
  const exprTests = unit.tests.flatMap((suite) => suite.promql_expr_test ?? [])
  const alerts = rules.filter((rule) => rule.alert)
  t.true(alerts.length >= 7)
  for (const rule of alerts) {
    const name = rule.alert!
    t.regex(name, /^Localpuppet[A-Z]/)
    t.true(['critical', 'warning', 'info'].includes(rule.labels?.severity ?? ''), `${name} has a severity`)
    t.truthy(rule.annotations?.summary, `${name} has a summary`)
    t.truthy(rule.annotations?.description, `${name} has a description`)
    t.true(readme.includes(`\`${name}\``), `README.md explains ${name}`)
    const its = alertTests.filter((unitTest) => unitTest.alertname === name)
    t.true(its.some((unitTest) => (unitTest.exp_alerts ?? []).length > 0), `a test where ${name} fires`)
    t.true(its.some((unitTest) => (unitTest.exp_alerts ?? []).length === 0), `a test where ${name} does not fire`)
  }

  for (const rule of rules.filter((rule) => rule.record)) {
    t.true(readme.includes(`\`${rule.record}\``), `README.md explains ${rule.record}`)
    t.true(exprTests.some((unitTest) => unitTest.expr.startsWith(rule.record!)), `a test of ${rule.record}`)
  }
})
