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
    // Issue 35: the node by its name, not the exporter's address alone.
    t.regex(rule.annotations?.summary ?? '', /\{\{ \$node \}\}|\$labels\.exported_node \$labels\.node/, `${name}'s summary names the node`)
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

promtoolTest('issue 35: the expiry a node writes (an index a day from expiry) fires LocalpuppetIndexExpiresSoon in the shipped rules, and LocalpuppetIndexExpired once past', async (t) => {
  const [{nodeMetrics}, {renderPrometheus}, {newRunRecord}, {tempDir}, {copyFile, writeFile}] = await Promise.all([
    import('../../src/lib/metrics/node-metrics.js'),
    import('../../src/lib/metrics/prometheus.js'),
    import('../../src/lib/state/run-record.js'),
    import('../helpers/temp.js'),
    import('node:fs/promises'),
  ])
  // promtool's clock starts at 0: an index expiring a day after it.
  const record = {...newRunRecord('run1', '/dev/null', new Date(0), {}), state: 'succeeded' as const, finishedAt: new Date(1000).toISOString(), fetch: {source: 'https://repo.example.com/', releases: [], indexExpires: new Date(86_400_000).toISOString()}}
  const text = renderPrometheus(nodeMetrics({current: record, lastCompleted: record, lastSucceeded: record, lastAttempt: record, records: [record]}, {}, null))
  const line = /^(localpuppet_index_expiry_timestamp_seconds) (\S+)$/m.exec(text)
  t.truthy(line, text)
  const dir = await tempDir(t)
  await copyFile(join(DIR, RULES), join(dir, RULES))
  // The annotations as the rules write them, with the time left (or past) as humanizeDuration says it (and the node named by its address: it wrote no name).
  const shipped = (await load<{groups: Array<{rules: Rule[]}>}>(RULES)).groups.flatMap((group) => group.rules)
  const annotations = (name: string, value: string) =>
    Object.entries(shipped.find((rule) => rule.alert === name)!.annotations!)
      .map(([key, text]) => `${key}: ${JSON.stringify(text.replace(/\{\{ \$node := [\s\S]*?\{\{- end \}\}/, '').replaceAll(/\{\{ (?:\$labels\.instance|\$node) \}\}/g, 'web1:9100').replaceAll('{{ $value | humanizeDuration }}', value).replaceAll(/\s+/g, ' ').trim())}`)
      .join(', ')
  const alert = (name: string, at: string, value: string | null) =>
    `      - eval_time: ${at}\n        alertname: ${name}\n        exp_alerts:${value ? `\n          - exp_labels: {severity: ${name.endsWith('Expired') ? 'critical' : 'warning'}, instance: "web1:9100", job: node}\n            exp_annotations: {${annotations(name, value)}}` : ' []'}\n`
  await writeFile(
    join(dir, 'expiry.test.yml'),
    `rule_files: [${RULES}]\nevaluation_interval: 1m\ntests:\n  - interval: 1h\n    input_series:\n      - series: '${line![1]}{instance="web1:9100", job="node"}'\n        values: '${line![2]}x48'\n    alert_rule_test:\n` +
      alert('LocalpuppetIndexExpiresSoon', '1h', '23h 0m 0s') +
      alert('LocalpuppetIndexExpired', '1h', null) +
      alert('LocalpuppetIndexExpiresSoon', '25h', null) +
      alert('LocalpuppetIndexExpired', '25h', '1h 0m 0s'),
  )
  const result = await execa('promtool', ['test', 'rules', 'expiry.test.yml'], {cwd: dir, reject: false})
  t.is(result.exitCode, 0, result.stdout + result.stderr)
})
