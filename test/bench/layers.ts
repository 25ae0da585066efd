/**
 * Layered node inputs (issue 36): `validate` of 1,000 generated nodes (3 datacenters x 5
 * roles, each node naming its site and role layer, over a release whose own layer sets
 * the defaults), the whole process timed: static checks only (`--puppet none`), and with
 * Puppet's syntax check and the variable check (one Puppet process). Each node's computed
 * document is checked. BENCH=layers runs only this; BENCH_LAYER_NODES changes the 1,000.
 */
import {spawnSync} from 'node:child_process'
import {mkdirSync, readFileSync, writeFileSync} from 'node:fs'
import {dirname, join} from 'node:path'

/** Writes the release, the layers and `count` node inputs under `dir`; returns the nodes directory and module dir. */
export function layeredFleet(dir: string, count: number): {nodes: string; modules: string} {
  const write = (path: string, text: string) => {
    mkdirSync(dirname(join(dir, path)), {recursive: true})
    writeFileSync(join(dir, path), text)
  }

  const release = 'modules/app/tags/1.0.0'
  write(`${release}/web/manifests/init.pp`, 'class web(Integer $port = 80, String $docroot = "/srv", Array[String] $vhosts = []) {\n  notify { "web ${port} ${docroot} ${::datacenter}": }\n}\n')
  write(`${release}/ntp/manifests/init.pp`, 'class ntp(Array[String] $servers = [], Boolean $iburst = false) {}\n')
  write(`${release}/db/manifests/init.pp`, 'class db(Integer $max_connections = 100, String $engine = "pg") {}\n')
  write(`${release}/cache/manifests/init.pp`, 'class cache(Integer $size_mb = 64) {}\n')
  write(`${release}/base/manifests/init.pp`, 'class base(String $motd = "") {}\n')
  write(`${release}/layer.yaml`, 'classes:\n  base:\n    motd: managed\n  ntp:\n    servers: [pool.ntp.org]\n    iburst: true\nparameters:\n  tier: standard\n  datacenter: none\n')
  const sites = ['dc1', 'dc2', 'dc3']
  const roles: Record<string, string> = {
    web: 'classes:\n  web:\n    port: 8080\n    vhosts: [www.example.com]\n',
    db: 'classes:\n  db:\n    max_connections: 500\n',
    cache: 'classes:\n  cache:\n    size_mb: 1024\n',
    api: 'layers: [role/web]\nclasses:\n  web:\n    port: 9000\n',
    batch: 'classes:\n  db: ~\n  cache: ~\n',
  }
  write('nodes/layers/common.yaml', 'parameters:\n  owner: ops\n')
  for (const site of sites) write(`nodes/layers/site/${site}.yaml`, `layers: [common]\nclasses:\n  ntp:\n    servers: [ntp1.${site}.example.com, ntp2.${site}.example.com]\nparameters:\n  datacenter: ${site}\n`)
  for (const [role, text] of Object.entries(roles)) write(`nodes/layers/role/${role}.yaml`, text)
  const roleNames = Object.keys(roles)
  for (let i = 0; i < count; i++) {
    write(`nodes/node${String(i).padStart(4, '0')}.yaml`, `app: app/tags/1.0.0\nlayers: [site/${sites[i % 3]}, role/${roleNames[i % 5]}]\nparameters:\n  tier: t${i % 7}\n`)
  }

  return {nodes: join(dir, 'nodes'), modules: join(dir, 'modules')}
}

export function layersBench(dir: string, bin: string): void {
  const count = Number(process.env.BENCH_LAYER_NODES ?? 1000)
  const {nodes, modules} = layeredFleet(join(dir, 'layers-bench'), count)
  const timeFile = join(dir, 'layers-bench.time')
  for (const puppet of ['none', 'puppet']) {
    const start = process.hrtime.bigint()
    const result = spawnSync('/usr/bin/time', ['-f', '%U %S %M', '-o', timeFile, bin, 'validate', nodes, '--module-dir', modules, '--puppet', puppet, '--format', 'json'], {encoding: 'utf8', maxBuffer: 256 * 1024 * 1024})
    const ms = Number(process.hrtime.bigint() - start) / 1e6
    const [user, system, kb] = readFileSync(timeFile, 'utf8').trim().split('\n').pop()!.split(' ').map(Number)
    const report = JSON.parse(result.stdout) as {inputs: unknown[]; problems: number}
    console.log(
      `layers: validate ${report.inputs.length} layered nodes (--puppet ${puppet}): ${(ms / 1000).toFixed(2)} s wall, ${(user + system).toFixed(2)} s CPU, ${(kb / 1024).toFixed(0)} MB peak, ${report.problems} problem(s), exit ${result.status}`,
    )
  }
}
