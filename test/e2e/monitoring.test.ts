import {readFile, readdir, writeFile} from 'node:fs/promises'
import {join} from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'

import test from 'ava'
import {execa} from 'execa'

import {FAKE_PUPPET, cli} from '../helpers/cli.js'
import {freePort} from '../helpers/net.js'
import {tempDir, writeTree} from '../helpers/temp.js'
import {testNeeding} from '../helpers/packages.js'

const exporterTest = await testNeeding(['prometheus', 'prometheus-node-exporter'])

async function setup(t: Parameters<typeof tempDir>[0]) {
  const dir = await tempDir(t)
  await writeTree(dir, {
    'modules/web/tags/1.0.0/web/manifests/init.pp': 'class web {}\n',
    'input.yaml': 'app: web/tags/1.0.0\nclasses: [web]\n',
    'fake/.keep': '',
  })
  const textfiles = join(dir, 'node-exporter')
  const metrics = join(textfiles, 'localpuppet.prom')
  const state = join(dir, 'state')
  const common = ['--module-dir', join(dir, 'modules'), '--state-dir', state, '--puppet', FAKE_PUPPET]
  const env = {FAKE_PUPPET_DIR: join(dir, 'fake'), FAKE_PUPPET_SLEEP: '0', LOCALPUPPET_METRICS_FILE: metrics}
  const apply = (...extra: string[]) => cli(['apply', join(dir, 'input.yaml'), ...common, ...extra], {env})
  return {dir, textfiles, metrics, state, common, env, apply}
}

/** `name{labels} value` lines of a scrape, as a map. */
function samples(text: string): Map<string, number> {
  const map = new Map<string, number>()
  for (const line of text.split('\n')) {
    if (line.startsWith('#') || line.trim() === '') continue
    const at = line.lastIndexOf(' ')
    map.set(line.slice(0, at), Number(line.slice(at + 1)))
  }

  return map
}

exporterTest('after every attempt the metrics file passes promtool and is scraped through a real node exporter', async (t) => {
  const {textfiles, metrics, apply} = await setup(t)
  t.is((await apply()).exitCode, 0)
  t.is((await apply('--app', 'web/tags/9.9.9')).exitCode, 66, 'refused: counted, and the metrics say so')
  const check = await execa('promtool', ['check', 'metrics'], {input: await readFile(metrics, 'utf8'), reject: false})
  t.is(check.exitCode, 0, check.stdout + check.stderr)
  t.deepEqual((await readdir(textfiles)).filter((name) => name !== 'localpuppet.prom'), [], 'no temp file left beside it')

  const port = await freePort()
  const exporter = execa('prometheus-node-exporter', [
    `--web.listen-address=127.0.0.1:${port}`,
    '--collector.disable-defaults',
    '--collector.textfile',
    `--collector.textfile.directory=${textfiles}`,
  ], {reject: false})
  t.teardown(() => {
    if (exporter.pid) process.kill(exporter.pid, 'SIGTERM')
  })
  let body = ''
  const until = Date.now() + 60_000
  while (Date.now() < until) {
    try {
      const response = await fetch(`http://127.0.0.1:${port}/metrics`)
      body = await response.text()
      if (response.ok) break
    } catch {}

    await sleep(200)
  }

  const scraped = samples(body)
  t.is(scraped.get('node_textfile_scrape_error'), 0, 'the exporter read the file without error')
  t.is(scraped.get('localpuppet_last_run_success'), 1)
  t.is(scraped.get('localpuppet_runs_total{state="succeeded"}'), 1)
  t.is(scraped.get('localpuppet_runs_total{state="refused"}'), 1)
  t.is(scraped.get('localpuppet_last_attempt_exit_code{release="",state="refused"}'), 66, 'refused before it resolved a release')
  t.is(scraped.get('localpuppet_release_info{app="web",ref="web/tags/1.0.0",release="web/tags/1.0.0"}'), 1)
  t.is(scraped.get('localpuppet_puppet_disabled{message=""}'), 0)
  t.true(scraped.get('localpuppet_last_success_timestamp_seconds')! > Date.now() / 1000 - 3600)
  t.true(scraped.get('localpuppet_last_attempt_timestamp_seconds')! >= scraped.get('localpuppet_last_success_timestamp_seconds')!)
  t.true(scraped.has('localpuppet_last_run_duration_seconds'))
})

test('metrics say when Puppet is disabled, with its message', async (t) => {
  const {dir, metrics, apply} = await setup(t)
  await writeFile(join(dir, 'fake', 'agent_disabled.lock'), JSON.stringify({disabled_message: 'db "migration"'}))
  t.is((await apply()).exitCode, 73)
  const text = await readFile(metrics, 'utf8')
  t.regex(text, /^localpuppet_puppet_disabled\{message="db \\"migration\\""\} 1$/m)
  t.regex(text, /^localpuppet_runs_total\{state="refused"\} 1$/m)
  t.notRegex(text, /^localpuppet_last_run_success/m, 'no completed run yet: no sample')
})

test('disable and enable rewrite the metrics file at once, not at the next run', async (t) => {
  const {metrics, state, env, apply} = await setup(t)
  t.is((await apply()).exitCode, 0)
  t.regex(await readFile(metrics, 'utf8'), /^localpuppet_puppet_disabled\{message=""\} 0$/m)
  const lock = ['--state-dir', state, '--puppet', FAKE_PUPPET]
  const disabled = await cli(['disable', 'maint "window"', ...lock], {env})
  t.is(disabled.exitCode, 0, disabled.stderr)
  const text = await readFile(metrics, 'utf8')
  t.regex(text, /^localpuppet_puppet_disabled\{message="maint \\"window\\""\} 1$/m)
  t.regex(text, /^localpuppet_runs_total\{state="succeeded"\} 1$/m, 'the rest as the last run left it: nothing counted')
  t.regex(text, /^localpuppet_last_run_success 1$/m)

  const enabled = await cli(['enable', ...lock], {env})
  t.is(enabled.exitCode, 0, enabled.stderr)
  t.regex(await readFile(metrics, 'utf8'), /^localpuppet_puppet_disabled\{message=""\} 0$/m)

  // No metrics file configured: nothing written.
  const elsewhere = join(state, '..', 'other.prom')
  t.is((await cli(['disable', 'x', ...lock], {env: {...env, LOCALPUPPET_METRICS_FILE: undefined}})).exitCode, 0)
  t.regex(await readFile(metrics, 'utf8'), /^localpuppet_puppet_disabled\{message=""\} 0$/m, 'left alone')
  t.is((await cli(['enable', ...lock, '--metrics-file', elsewhere], {env: {...env, LOCALPUPPET_METRICS_FILE: undefined}})).exitCode, 0)
  t.regex(await readFile(elsewhere, 'utf8'), /^localpuppet_puppet_disabled\{message=""\} 0$/m, '--metrics-file names it')
})

test('status --check is a Nagios plugin: one line with perfdata, OK, WARNING, CRITICAL, UNKNOWN', async (t) => {
  const {dir, state, apply, env} = await setup(t)
  const check = (...extra: string[]) => cli(['status', '--state-dir', state, '--puppet', FAKE_PUPPET, '--check', ...extra], {env})
  const none = await check()
  t.is(none.exitCode, 3)
  t.regex(none.stdout, /^LOCALPUPPET UNKNOWN - no runs yet \| age=U;7200;21600;0$/)

  t.is((await apply()).exitCode, 0)
  const ok = await check()
  t.is(ok.exitCode, 0, ok.stdout)
  t.regex(ok.stdout, /^LOCALPUPPET OK - last success web\/tags\/1\.0\.0 \d+s ago \(run \S+, succeeded\) \| age=\d+s;7200;21600;0 duration=[\d.]+s;;;0$/)

  await sleep(1500)
  const warn = await check('--warn', '1s', '--crit', '1h')
  t.is(warn.exitCode, 1, warn.stdout)
  t.regex(warn.stdout, /^LOCALPUPPET WARNING - last success \d+s ago \(warning at 1s\) \| age=\d+s;1;3600;0/)

  t.is((await apply('--app', 'web/tags/9.9.9')).exitCode, 66)
  const crit = await check()
  t.is(crit.exitCode, 2, crit.stdout)
  t.regex(crit.stdout, /^LOCALPUPPET CRITICAL - refused: web\/tags\/9\.9\.9: .*9\.9\.9.* \| age=/)
  t.is(crit.stdout.split('\n').length, 1, 'one line')

  await writeFile(join(dir, 'fake', 'agent_disabled.lock'), JSON.stringify({disabled_message: 'maintenance'}))
  t.is((await apply()).exitCode, 73)
  const disabled = await check()
  t.is(disabled.exitCode, 2)
  t.regex(disabled.stdout, /refused: web\/tags\/1\.0\.0: puppet is disabled: maintenance/)
  t.is((await cli(['status', '--state-dir', state, '--check', '--warn', 'soon'])).exitCode, 64)
})

test('the metrics file can be set in the node configuration (metrics_file)', async (t) => {
  const {dir, common} = await setup(t)
  const metrics = join(dir, 'from-config.prom')
  await writeFile(join(dir, 'config.yaml'), `metrics_file: ${metrics}\n`)
  const result = await cli(['apply', join(dir, 'input.yaml'), ...common], {env: {FAKE_PUPPET_DIR: join(dir, 'fake'), FAKE_PUPPET_SLEEP: '0', LOCALPUPPET_CONFIG: join(dir, 'config.yaml')}})
  t.is(result.exitCode, 0, result.stderr)
  t.regex(await readFile(metrics, 'utf8'), /^localpuppet_runs_total\{state="succeeded"\} 1$/m)
})
