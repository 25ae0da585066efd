import {cp, mkdir, readFile, writeFile} from 'node:fs/promises'
import {join} from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'

import type {ExecutionContext} from 'ava'

import {type CliResult, REPO, cli, isolatePuppet, statusJson} from '../helpers/cli.js'
import {startNginx} from '../helpers/nginx.js'
import {testNeeding} from '../helpers/packages.js'
import {type PrometheusServer, type Started, startNodeExporter, startPrometheus, startScrapeRelay} from '../helpers/prometheus.js'
import {DEMO_MODULES, demoRepository, keyPair} from '../helpers/repository.js'
import {tempDir} from '../helpers/temp.js'

/*
 * Issue 23 end to end, with real parts on 127.0.0.1: nginx serving the repository, three
 * nodes (each its own configuration, module dir, state dir, input path and node exporter
 * textfile directory) whose timer command is the README's drop-in (`localpuppet apply
 * --fetch --if-changed --timeout 3600`) running the real `puppet apply`, one
 * prometheus-node-exporter per node, and a Prometheus scraping them every second. The
 * canary's exporter is scraped through a relay the test can hold, so that "Prometheus has
 * not scraped the canary's run yet" is a state the test sets rather than a race. The demo's
 * foo 1.3.0 and 1.4.0 stand for the 1.0.0 and 1.1.0.
 */

const fleetTest = await testNeeding(['nginx-light', 'prometheus', 'prometheus-node-exporter', 'puppet-agent'])

const NODES = ['node1', 'node2', 'node3'] as const
type NodeName = (typeof NODES)[number]
const CHANNEL_OF: Record<NodeName, string> = {node1: 'canary', node2: 'stable', node3: 'stable'}
/** The README's timer command (integrations/systemd's drop-in for a pulling node), with --json to read its record. */
const TIMER_COMMAND = ['apply', '--fetch', '--if-changed', '--timeout', '3600', '--json']

interface FleetNode {
  name: NodeName
  config: string
  state: string
  input: string
  metrics: string
  exporter: Started
  /** The node's systemd timer would run this, with its configuration. */
  timer(): Promise<CliResult>
}

/** Polls `check` until it is true, or fails the test naming what it waited for. */
async function until(t: ExecutionContext, what: string, check: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    if (await check()) return
    await sleep(250)
  }

  t.fail(`timed out after ${timeoutMs / 1000}s waiting until ${what}`)
  throw new Error(`timed out waiting until ${what}`)
}

/** The release each node's newest scraped `localpuppet_applied_release_info` names, by node name. */
async function appliedInPrometheus(prometheus: PrometheusServer, exporters: Map<string, NodeName>): Promise<Record<string, string>> {
  const result = await prometheus.query('localpuppet_applied_release_info')
  return Object.fromEntries(result.map((sample) => [exporters.get(sample.metric.instance) ?? sample.metric.instance, sample.metric.release]))
}

fleetTest('pull fleet: publish, canary, promotion gated on what Prometheus scraped, stable follows; a failing canary stops the promotion; a silent node is "stopped reporting"; canary taken back, a yanked tag refused, the policy of stable refused then overridden; a typo refused at publish; drift seen and alerted', async (t) => {
  t.timeout(240_000)
  const dir = await tempDir(t)
  const {key, pub} = await keyPair(dir, 'release')

  // The repository: foo 1.3.0 and 1.4.0 published (signed), both channels on 1.3.0.
  const {repo} = await demoRepository(join(dir, 'build'), key)
  const promote = (release: string, channel: string, ...extra: string[]) => cli(['promote', release, '--channel', channel, '--repo', repo, '--sign', key, ...extra])
  for (const channel of ['canary', 'stable']) {
    const promoted = await promote('foo/tags/1.3.0', channel)
    t.is(promoted.exitCode, 0, promoted.stderr)
  }

  // The nodes' inputs, published by name: node1 follows canary, node2 and node3 stable.
  const inputs = join(dir, 'inputs')
  await mkdir(inputs)
  for (const name of NODES) await writeFile(join(inputs, `${name}.yaml`), `app: foo/channels/${CHANNEL_OF[name]}\nclasses:\n  foo:\n    port: 8080\nparameters:\n  datacenter: ams1\n`)
  const publishedInputs = await cli(['publish', '--inputs', inputs, '--repo', repo, '--sign', key, '--json'])
  t.is(publishedInputs.exitCode, 0, publishedInputs.stderr)
  const index = () => readFile(join(repo, 'index.json'), 'utf8').then((text) => JSON.parse(text))
  t.deepEqual(Object.keys((await index()).nodes), [...NODES])
  t.deepEqual((await index()).apps.foo.channels, {canary: '1.3.0', stable: '1.3.0'})

  const nginx = await startNginx(repo, join(dir, 'nginx'))
  t.teardown(() => nginx.stop())

  // Three nodes, each with its own configuration (root's, 0644 in 0755 directories, as the config check requires).
  const nodes = {} as Record<NodeName, FleetNode>
  for (const name of NODES) {
    const home = join(dir, 'nodes', name)
    const textfiles = join(home, 'node-exporter')
    await mkdir(join(home, 'modules'), {recursive: true, mode: 0o755})
    const exporter = await startNodeExporter(textfiles)
    t.teardown(() => exporter.stop())
    const node: FleetNode = {
      name,
      config: join(home, 'config.yaml'),
      state: join(home, 'state'),
      input: join(home, 'etc', 'input.yaml'),
      metrics: join(textfiles, 'localpuppet.prom'),
      exporter,
      timer: () => cli(TIMER_COMMAND, {env: {LOCALPUPPET_CONFIG: node.config}}),
    }
    await mkdir(join(home, 'etc'), {mode: 0o755})
    const settings = {
      module_dir: join(home, 'modules'),
      state_dir: node.state,
      source: nginx.url,
      trust: [pub],
      input: node.input,
      input_from: 'repository',
      node_name: name,
      metrics_file: node.metrics,
      puppet_args: isolatePuppet(home),
    }
    await writeFile(node.config, Object.entries(settings).map(([k, v]) => `${k}: ${JSON.stringify(v)}\n`).join(''), {mode: 0o644})
    nodes[name] = node
  }

  // The canary is scraped through a relay the test can hold; the stable nodes' exporters directly.
  const relay = await startScrapeRelay(`${nodes.node1.exporter.url}/metrics`)
  t.teardown(() => relay.close())
  const exporters = new Map<string, NodeName>([[relay.target, 'node1'], ...(['node2', 'node3'] as const).map((name) => [`127.0.0.1:${nodes[name].exporter.port}`, name] as [string, NodeName])])
  // With the shipped rules, as the README's Prometheus has them.
  const prometheus = await startPrometheus(join(dir, 'prometheus'), [...exporters.keys()], {rules: [join(REPO, 'integrations/prometheus/localpuppet.rules.yml')]})
  t.teardown(() => prometheus.stop())
  const gate = (release: string) => promote(release, 'stable', '--require-healthy', 'canary', '--prometheus', prometheus.url)
  /** fleet status from an operator's machine: with the repository's index now (--source), or as each node last resolved its channel. */
  const fleetStatus = async (withSource = true) => {
    const result = await cli(['fleet', 'status', '--prometheus', prometheus.url, ...(withSource ? ['--source', nginx.url, '--trust', pub] : []), '--json'])
    return {exitCode: result.exitCode, status: JSON.parse(result.stdout || 'null'), stderr: result.stderr}
  }

  /** The timer commands of these nodes, at the same time (as their timers would fire): each must exit `exitCode`. */
  const runTimers = async (names: NodeName[], expected: {release: string; state: string; exitCode: number}) => {
    const results = await Promise.all(names.map((name) => nodes[name].timer()))
    for (const [i, result] of results.entries()) {
      const name = names[i]
      t.is(result.exitCode, expected.exitCode, `${name}: ${result.stderr}`)
      const record = JSON.parse(result.stdout)
      t.like(record, {state: expected.state, release: expected.release}, name)
      // What Puppet ran: the release fetched into the node's own module dir, whose notifies it applied.
      t.is(record.modulepath?.[0], join(dir, 'nodes', name, 'modules', expected.release), name)
      if (expected.state === 'succeeded') t.true(record.resources?.changed >= 2, `${name}: the real puppet applied the notifies: ${JSON.stringify(record.resources)}`)
    }

    return results.map((result) => JSON.parse(result.stdout))
  }

  // Every node's timer: its input comes from the repository, its channel names 1.3.0.
  const first = await runTimers([...NODES], {release: 'foo/tags/1.3.0', state: 'succeeded', exitCode: 0})
  for (const [i, name] of NODES.entries()) {
    t.like(first[i], {ref: `foo/channels/${CHANNEL_OF[name]}`, fetch: {input: {node: name, sha256: (await index()).nodes[name].sha256, status: 'updated'}}})
    // Kept as the node's local input: the bytes published for it.
    t.is(await readFile(nodes[name].input, 'utf8'), await readFile(join(inputs, `${name}.yaml`), 'utf8'))
  }

  await until(t, 'Prometheus has scraped all three nodes on 1.3.0', async () => {
    const applied = await appliedInPrometheus(prometheus, exporters)
    return NODES.every((name) => applied[name] === 'foo/tags/1.3.0')
  })

  // 1.4.0 to canary. Read through the index now, node1 is off its wanted release at once;
  // as the nodes last resolved their channels, every node still looks on it.
  t.is((await promote('foo/tags/1.4.0', 'canary')).exitCode, 0)
  const moved = await fleetStatus()
  t.is(moved.exitCode, 1, moved.stderr)
  t.like(moved.status, {offWanted: ['node1'], wantedFrom: {from: 'index', source: nginx.url, version: (await index()).version}})
  t.like(moved.status.nodes[0], {node: 'node1', desired: 'foo/tags/1.4.0', lastResolved: 'foo/tags/1.3.0', applied: 'foo/tags/1.3.0', onWanted: false})
  const lastRun = await fleetStatus(false)
  t.is(lastRun.exitCode, 0, lastRun.stderr)
  t.like(lastRun.status, {offWanted: [], wantedFrom: {from: 'last run'}})
  const lastRunText = await cli(['fleet', 'status', '--prometheus', prometheus.url])
  t.regex(lastRunText.stdout, /^Wanted: as each node resolved it on its last run/m)

  // Before the canary's timer has run, the gate is shut, naming node1.
  const early = await gate('foo/tags/1.4.0')
  t.is(early.exitCode, 1, early.stderr)
  t.regex(early.stderr, /node1 \(not yet run\)/)
  t.notRegex(early.stderr, /node[23]/, 'only the nodes following canary are judged')
  t.is((await index()).apps.foo.channels.stable, '1.3.0', 'a refused promotion changes nothing')

  // The canary's timer applies 1.4.0, but Prometheus has not scraped it yet (the relay holds
  // what it served before the run): still shut. Once scraped, the promotion goes through.
  await relay.hold()
  await runTimers(['node1'], {release: 'foo/tags/1.4.0', state: 'succeeded', exitCode: 0})
  t.regex(await readFile(nodes.node1.metrics, 'utf8'), /^localpuppet_applied_release_info\{app="foo",release="foo\/tags\/1\.4\.0"\} 1$/m, 'the node has written it')
  const unscraped = await gate('foo/tags/1.4.0')
  t.is(unscraped.exitCode, 1, unscraped.stderr)
  t.regex(unscraped.stderr, /node1 \(not yet run\)/)
  t.is((await index()).apps.foo.channels.stable, '1.3.0')
  relay.release()
  await until(t, "Prometheus has scraped node1's run of 1.4.0", async () => (await appliedInPrometheus(prometheus, exporters)).node1 === 'foo/tags/1.4.0')
  const promoted = await gate('foo/tags/1.4.0')
  t.is(promoted.exitCode, 0, promoted.stderr)
  t.regex(promoted.stdout, /foo\/channels\/stable: 1\.3\.0 -> 1\.4\.0/)
  t.is((await index()).apps.foo.channels.stable, '1.4.0')

  // The stable nodes' timers take it.
  await runTimers(['node2', 'node3'], {release: 'foo/tags/1.4.0', state: 'succeeded', exitCode: 0})
  await until(t, 'Prometheus has scraped every node on 1.4.0', async () => {
    const applied = await appliedInPrometheus(prometheus, exporters)
    return NODES.every((name) => applied[name] === 'foo/tags/1.4.0')
  })
  const allOn = await fleetStatus()
  t.is(allOn.exitCode, 0, JSON.stringify(allOn.status))
  t.deepEqual(
    allOn.status.nodes.map((row: any) => [row.node, row.wanted, row.desired, row.applied, row.state, row.onWanted]),
    NODES.map((name) => [name, `foo/channels/${CHANNEL_OF[name]}`, 'foo/tags/1.4.0', 'foo/tags/1.4.0', 'succeeded', true]),
  )
  t.deepEqual(allOn.status.byApplied, {'foo/tags/1.4.0': 3})

  // Issue 35: a typo'd input is refused at publish (65, its file, line and key, did you mean),
  // nothing is published, and node2's next timer run keeps the input it has.
  const typos = join(dir, 'typos')
  await cp(inputs, typos, {recursive: true})
  await writeFile(join(typos, 'node2.yaml'), 'app: foo/channels/stable\nclasses:\n  foo:\n    prot: 8080\n')
  const indexBefore = await readFile(join(repo, 'index.json'), 'utf8')
  const typo = await cli(['publish', '--inputs', typos, '--repo', repo, '--sign', key])
  t.is(typo.exitCode, 65, typo.stderr)
  t.regex(typo.stderr, /^localpuppet: \S+\/node2\.yaml:4: class foo has no parameter prot \(did you mean port\?\)/m)
  t.is(await readFile(join(repo, 'index.json'), 'utf8'), indexBefore, 'nothing published')
  const keptInput = await nodes.node2.timer()
  t.is(keptInput.exitCode, 0, keptInput.stderr)
  t.like(JSON.parse(keptInput.stdout), {state: 'skipped', release: 'foo/tags/1.4.0'})
  t.is(await readFile(nodes.node2.input, 'utf8'), await readFile(join(inputs, 'node2.yaml'), 'utf8'))

  // A release that fails on the canary: foo 1.5.0, whose class fails to compile.
  const broken = join(dir, 'broken')
  await cp(DEMO_MODULES, broken, {recursive: true})
  await cp(join(broken, 'foo', 'tags', '1.4.0'), join(broken, 'foo', 'tags', '1.5.0'), {recursive: true})
  await writeFile(join(broken, 'foo', 'tags', '1.5.0', 'foo', 'manifests', 'init.pp'), "class foo (Integer $port = 80) {\n  fail('broken')\n}\n")
  const archive = join(dir, 'foo-1.5.0.tar.gz')
  const packed = await cli(['pack', 'foo/tags/1.5.0', '--module-dir', broken, '-o', archive, '--sign', key])
  t.is(packed.exitCode, 0, packed.stderr)
  const published = await cli(['publish', archive, '--repo', repo, '--sign', key])
  t.is(published.exitCode, 0, published.stderr)
  t.is((await promote('foo/tags/1.5.0', 'canary')).exitCode, 0)

  const failed = await nodes.node1.timer()
  t.not(failed.exitCode, 0, failed.stdout)
  t.like(JSON.parse(failed.stdout), {state: 'failed', release: 'foo/tags/1.5.0', ref: 'foo/channels/canary'})
  await until(t, "Prometheus has scraped node1's failed run", async () => {
    const result = await prometheus.query('localpuppet_last_run_success == 0')
    return result.some((sample) => exporters.get(sample.metric.instance) === 'node1')
  })
  const refused = await gate('foo/tags/1.5.0')
  t.is(refused.exitCode, 1, refused.stderr)
  t.regex(refused.stderr, /node1 \(failed\)/)
  // Issue 35: which run failed, and what Puppet said first, from node1's metrics.
  const failedRun = JSON.parse(failed.stdout)
  t.regex(failedRun.firstError, /^Error: .*broken/)
  t.regex(refused.stdout, new RegExp(`^node1 +foo/tags/1\\.4\\.0 +failed +newest attempt failed \\(exit \\d+\\) on foo/tags/1\\.5\\.0, run ${failedRun.id}: Error: .*broken`, 'm'))
  t.is((await index()).apps.foo.channels.stable, '1.4.0', 'stable still names 1.4.0')

  // The stable nodes' timers run again: nothing changed for them (--if-changed skips), they stay on 1.4.0, and say so.
  await runTimers(['node2', 'node3'], {release: 'foo/tags/1.4.0', state: 'skipped', exitCode: 0})
  for (const name of ['node2', 'node3'] as const) {
    t.like((await statusJson(nodes[name].state)).record, {state: 'skipped', release: 'foo/tags/1.4.0', ref: 'foo/channels/stable'})
    t.regex(await readFile(nodes[name].metrics, 'utf8'), /^localpuppet_applied_release_info\{app="foo",release="foo\/tags\/1\.4\.0"\} 1$/m)
  }

  // The canary has not applied what its channel names: fleet status says so (1).
  await until(t, "Prometheus shows node1's channel resolved to 1.5.0", async () => {
    const result = await prometheus.query('localpuppet_desired_release_info{node="node1"}')
    return result[0]?.metric.release === 'foo/tags/1.5.0'
  })
  const offCanary = await fleetStatus()
  t.is(offCanary.exitCode, 1)
  t.like(
    offCanary.status.nodes.find((row: any) => row.node === 'node1'),
    {desired: 'foo/tags/1.5.0', applied: 'foo/tags/1.4.0', state: 'failed', onWanted: false},
  )
  t.deepEqual(offCanary.status.offWanted, ['node1'])
  const canaryRow = offCanary.status.nodes.find((row: any) => row.node === 'node1')
  t.is(canaryRow.runId, failedRun.id)
  t.regex(canaryRow.message, /^Error: .*broken/)

  // Issue 35: canary taken back to its previous tag in one command (its history in the signed index says which); node1 follows.
  const back = await cli(['channel', 'back', 'foo/channels/canary', '--repo', repo, '--sign', key])
  t.is(back.exitCode, 0, back.stderr)
  t.regex(back.stdout, /^foo\/channels\/canary: 1\.5\.0 -> 1\.4\.0 \(back\)$/m)
  await runTimers(['node1'], {release: 'foo/tags/1.4.0', state: 'succeeded', exitCode: 0})

  // 1.5.0 yanked: no channel may name it again, and a node that does not have it does not install it.
  const yanked = await cli(['repository', 'yank', 'foo/tags/1.5.0', '--reason', 'fails to compile', '--repo', repo, '--sign', key])
  t.is(yanked.exitCode, 0, yanked.stderr)
  const toYanked = await promote('foo/tags/1.5.0', 'canary')
  t.is(toYanked.exitCode, 66)
  t.regex(toYanked.stderr, /foo\/channels\/canary not moved: foo\/tags\/1\.5\.0 is yanked \(\S+: fails to compile\)/)
  const fetchYanked = await cli(['fetch', 'foo/tags/1.5.0'], {env: {LOCALPUPPET_CONFIG: nodes.node2.config}})
  t.is(fetchYanked.exitCode, 66, fetchYanked.stderr)
  t.regex(fetchYanked.stderr, /^localpuppet: foo\/tags\/1\.5\.0 is yanked \(\S+: fails to compile\) in the repository http:\/\/127\.0\.0\.1:\d+\S*: not installed$/m)
  // node1 ran 1.5.0 (and failed): it has it installed, and keeps it, with a warning.
  const kept = await cli(['fetch', 'foo/tags/1.5.0'], {env: {LOCALPUPPET_CONFIG: nodes.node1.config}})
  t.is(kept.exitCode, 0, kept.stderr)
  t.is(kept.stdout.trim(), 'foo/tags/1.5.0: already present')
  t.regex(kept.stderr, /warning: foo\/tags\/1\.5\.0 is yanked \(\S+: fails to compile\); kept, as it is installed here, but no node takes it anew/)

  // stable's policy: 30 minutes healthy on canary. A promote without it (no --require-healthy given) is refused, naming the
  // policy and what was missing; --override-policy moves it, and the channel's history records the reason.
  const policy = await cli(['channel', 'policy', 'foo/channels/stable', '--require-healthy', 'canary', '--for', '30m', '--repo', repo, '--sign', key])
  t.is(policy.exitCode, 0, policy.stderr)
  const unmet = await promote('foo/tags/1.3.0', 'stable', '--prometheus', prometheus.url)
  t.is(unmet.exitCode, 1, unmet.stderr)
  t.regex(unmet.stderr, /^localpuppet: foo\/channels\/stable not moved: policy of foo\/channels\/stable \(healthy on canary for 30m, at least 1 node\) not met: 1 of 1 nodes following foo\/channels\/canary are not healthy on foo\/tags\/1\.3\.0: node1 \(not yet run\)$/m)
  t.is((await index()).apps.foo.channels.stable, '1.4.0')
  const overridden = await promote('foo/tags/1.3.0', 'stable', '--override-policy', 'hotfix tested by hand')
  t.is(overridden.exitCode, 0, overridden.stderr)
  const history = JSON.parse((await cli(['channel', 'history', 'foo/channels/stable', '--repo', repo, '--json'])).stdout)
  t.like(history.moves[0], {action: 'promote', from: '1.4.0', to: '1.3.0', override: {reason: 'hotfix tested by hand', policy: 'healthy on canary for 30m, at least 1 node'}})
  t.true((await cli(['channel', 'back', 'foo/channels/stable', '--repo', repo, '--sign', key])).exitCode === 0)
  t.is((await index()).apps.foo.channels.stable, '1.4.0')

  // node3's exporter goes away: Prometheus marks its series stale on the next failed scrape.
  await nodes.node3.exporter.stop()
  let silent: Awaited<ReturnType<typeof fleetStatus>> | undefined
  await until(t, 'fleet status lists node3 as stopped reporting', async () => {
    silent = await fleetStatus()
    return silent.status?.nodes.some((row: any) => row.node === 'node3' && row.state === 'stopped reporting') === true
  })
  t.is(silent!.exitCode, 1)
  t.like(silent!.status.nodes.find((row: any) => row.node === 'node3'), {state: 'stopped reporting', onWanted: null, wanted: 'foo/channels/stable', desired: 'foo/tags/1.4.0'})
  // Without the index: the label set node3 reported last (1.4.0), not its older one (1.3.0) also seen within the lookback.
  const silentLastRun = await fleetStatus(false)
  // Issue 35: and the release it applied last (1.4.0 too), not '-'.
  t.like(silentLastRun.status.nodes.find((row: any) => row.node === 'node3'), {state: 'stopped reporting', desired: 'foo/tags/1.4.0', applied: 'foo/tags/1.4.0'})
  t.true(silent!.status.noAnswer.includes('node3'))

  // Issue 35: drift. node2 is pinned to foo 1.6.0, whose class manages a file its input names:
  // that first run's changes are the release's, not drift.
  const managed = join(dir, 'nodes', 'node2', 'motd')
  await cp(join(broken, 'foo', 'tags', '1.4.0'), join(broken, 'foo', 'tags', '1.6.0'), {recursive: true})
  await writeFile(join(broken, 'foo', 'tags', '1.6.0', 'foo', 'manifests', 'init.pp'), 'class foo (Integer $port = 80, Optional[String] $motd = undef) {\n  if $motd { file { $motd: content => "managed by foo\\n" } }\n}\n')
  const motdArchive = join(dir, 'foo-1.6.0.tar.gz')
  t.is((await cli(['pack', 'foo/tags/1.6.0', '--module-dir', broken, '-o', motdArchive, '--sign', key])).exitCode, 0)
  t.is((await cli(['publish', motdArchive, '--repo', repo, '--sign', key])).exitCode, 0)
  await writeFile(join(inputs, 'node2.yaml'), `app: foo/tags/1.6.0\nclasses:\n  foo:\n    port: 8080\n    motd: ${JSON.stringify(managed)}\n`)
  const pinned = await cli(['publish', '--node', 'node2', '--input', join(inputs, 'node2.yaml'), '--repo', repo, '--sign', key])
  t.is(pinned.exitCode, 0, pinned.stderr)
  const onMotd = await nodes.node2.timer()
  t.like(JSON.parse(onMotd.stdout), {state: 'succeeded', release: 'foo/tags/1.6.0', resources: {correctiveChange: 0}}, onMotd.stderr)
  t.is(await readFile(managed, 'utf8'), 'managed by foo\n')

  // Changed by hand. The next timer run that enforces (the compared run older than --max-age) puts it back: drift.
  await writeFile(managed, 'changed by hand\n')
  await sleep(1100)
  const enforced = await cli([...TIMER_COMMAND, '--max-age', '1s'], {env: {LOCALPUPPET_CONFIG: nodes.node2.config}})
  t.is(enforced.exitCode, 0, enforced.stderr)
  t.like(JSON.parse(enforced.stdout), {state: 'succeeded', resources: {correctiveChange: 1}, corrected: {resources: [`File[${managed}]`]}})
  t.is(await readFile(managed, 'utf8'), 'managed by foo\n')
  const node2 = `127.0.0.1:${nodes.node2.exporter.port}`
  await until(t, 'the shipped LocalpuppetDrift alert fires for node2', async () => (await prometheus.alerts()).some((alert) => alert.labels.alertname === 'LocalpuppetDrift' && alert.labels.instance === node2 && alert.state === 'firing'))
  const drift = (await prometheus.alerts()).find((alert) => alert.labels.alertname === 'LocalpuppetDrift' && alert.labels.instance === node2)!
  t.is(drift.annotations.summary, 'Drift corrected on node2', 'the summary names the node, not its exporter')
  const drifted = await fleetStatus()
  t.like(drifted.status.nodes.find((row: any) => row.node === 'node2'), {drift: 1, applied: 'foo/tags/1.6.0', runId: JSON.parse(enforced.stdout).id})
})
