import {chmod, mkdtemp, rm, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'

import test from 'ava'

import {transportSpec} from '../../../../src/cli/fleet-flags.js'
import {InputError, NotFoundError, UntrustedPathError, UsageError} from '../../../../src/lib/errors.js'
import {parseTargetList, readInventory, readNodesFile} from '../../../../src/lib/rollout/transports/ssh-targets.js'

async function file(t: {teardown(fn: () => Promise<void>): void}, text: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'localpuppet-targets-'))
  t.teardown(() => rm(dir, {recursive: true, force: true}))
  await writeFile(join(dir, 'fleet'), text)
  return join(dir, 'fleet')
}

test('--targets and a --nodes file: [USER@]NODE[:PORT] each; a bad entry is 64 naming it (and its line); a host can never be an ssh option', async (t) => {
  t.deepEqual(parseTargetList('web1,deploy@web2,web3:2222'), [
    {node: 'web1', host: 'web1', user: null, port: null},
    {node: 'web2', host: 'web2', user: 'deploy', port: null},
    {node: 'web3', host: 'web3', user: null, port: 2222},
  ])
  for (const [text, message] of [
    ['web1,,web2', /expected node names separated by commas/],
    ['-oProxyCommand=evil', /"-oProxyCommand=evil" is not \[USER@\]NODE\[:PORT\]/],
    ['web1:70000', /the port must be a whole number 1\.\.65535/],
    ['web1,web1', /node web1 is listed twice/],
  ] as const) {
    t.throws(() => parseTargetList(text), {instanceOf: UsageError, message}, text)
  }

  const nodes = await file(t, '# the fleet\nweb1\n\nroot@db1:2200\nbad name\n')
  await t.throwsAsync(readNodesFile(nodes), {instanceOf: UsageError, message: /line 5: "bad name" is not/})
  await t.throwsAsync(readNodesFile('/nonexistent/fleet'), {instanceOf: NotFoundError, message: '--nodes /nonexistent/fleet: no such file'})
})

test("an inventory: defaults, then each node's host, user and port; a mistake is 65 naming the node and key", async (t) => {
  const good = await file(t, 'user: deploy\nport: 2200\nnodes:\n  web1:\n  db1: {host: 10.0.0.5, user: admin, port: 22}\n  v6: {host: "::1"}\n')
  t.deepEqual(await readInventory(good), [
    {node: 'web1', host: 'web1', user: 'deploy', port: 2200},
    {node: 'db1', host: '10.0.0.5', user: 'admin', port: 22},
    {node: 'v6', host: '::1', user: 'deploy', port: 2200},
  ])
  for (const [text, message] of [
    ['nodes:\n  web1: {hots: x}\n', /node "web1": unknown key "hots" \(expected host, user, port\)/],
    ['nodes:\n  web1: {host: -oProxyCommand=x}\n', /node "web1": host "-oProxyCommand=x" is not a host name/],
    ['nodes:\n  web1: {port: "22"}\n', /node "web1": the port must be a whole number/],
    ['nodes: []\n', /nodes: expected a mapping/],
    ['nodes: {}\n', /no node listed/],
    ['hosts: {}\n', /unknown key "hosts"/],
    ['nodes: [\n', /not YAML/],
  ] as const) {
    await t.throwsAsync(readInventory(await file(t, text)), {instanceOf: InputError, message}, text)
  }
})

test('--via ssh needs exactly one list of nodes; a flag of the other transport is 64; the spec records the nodes and absolute paths', async (t) => {
  const base = {via: 'ssh', mco: 'mco'}
  await t.throwsAsync(transportSpec(base), {instanceOf: UsageError, message: /--via ssh reaches the nodes listed: give one of --nodes FILE, --targets LIST or --inventory FILE$/})
  await t.throwsAsync(transportSpec({...base, targets: 'web1', with: ['role=web']}), {instanceOf: UsageError, message: '--with is for --via mco, not --via ssh'})
  await t.throwsAsync(transportSpec({via: 'mco', mco: 'mco', 'known-hosts': 'kh'}), {instanceOf: UsageError, message: '--known-hosts is for --via ssh, not --via mco'})
  await t.throwsAsync(transportSpec({...base, targets: 'web1', 'ssh-config': '/nonexistent/ssh_config'}), {instanceOf: NotFoundError, message: '--ssh-config /nonexistent/ssh_config: no such file'})
  const spec = await transportSpec({mco: 'mco', targets: 'web1', 'known-hosts': 'kh'} as Parameters<typeof transportSpec>[0])
  t.like(spec, {via: 'ssh', targets: [{node: 'web1'}], targetsFrom: '--targets', config: null, knownHosts: join(process.cwd(), 'kh'), localpuppet: 'localpuppet'})
})

test('a --nodes file, an inventory, an ssh configuration, a known hosts file or an ssh executable others can write is refused (77) naming it: it says which hosts root logs in to, with what ssh runs (ProxyCommand) and which keys it believes', async (t) => {
  const nodes = await file(t, 'web1\n')
  const inventory = await file(t, 'nodes:\n  web1:\n')
  await chmod(nodes, 0o666)
  await chmod(inventory, 0o646)
  await t.throwsAsync(readNodesFile(nodes), {instanceOf: UntrustedPathError, message: new RegExp(`${nodes} is not trusted: writable by group and others`)})
  await t.throwsAsync(readInventory(inventory), {instanceOf: UntrustedPathError, message: new RegExp(`${inventory} is not trusted: writable by others`)})
  await t.throwsAsync(transportSpec({mco: 'mco', via: 'ssh', nodes}), {instanceOf: UntrustedPathError})
  for (const flag of ['ssh-config', 'known-hosts'] as const) {
    const path = await file(t, '')
    await chmod(path, 0o666)
    await t.throwsAsync(transportSpec({mco: 'mco', via: 'ssh', targets: 'web1', [flag]: path}), {instanceOf: UntrustedPathError, message: new RegExp(`${path} is not trusted`)}, flag)
  }

  // The ssh root runs: only what root (or this user) alone can write.
  const ssh = await file(t, '#!/bin/sh\n')
  await chmod(ssh, 0o777)
  await t.throwsAsync(transportSpec({mco: 'mco', via: 'ssh', targets: 'web1', ssh}), {instanceOf: UntrustedPathError, message: new RegExp(`ssh executable ${ssh} is not trusted`)})
  await chmod(ssh, 0o755)
  t.like(await transportSpec({mco: 'mco', via: 'ssh', targets: 'web1', ssh}), {ssh})
  await chmod(nodes, 0o644)
  t.like(await transportSpec({mco: 'mco', via: 'ssh', nodes}), {targets: [{node: 'web1'}]})
})
