import {createHash, randomUUID} from 'node:crypto'
import {readFile} from 'node:fs/promises'

import {readRecordHead} from '../install/install-record.js'
import {readReleaseTree, treeDigest} from '../tree/release-tree.js'
import {stringifyJson} from '../util/json.js'
import {NO_SECRET_DIGEST} from '../util/secret.js'
import type {RunPlan} from './run-plan.js'

/**
 * What a run depends on, as one digest: the tree digest of every release on the
 * modulepath, the ENC document (without its run id), the facts given, the manifest,
 * noop and the arguments passed to puppet. Two runs with the same fingerprint apply the
 * same code to the same inputs, with the same Puppet (implementation and version) in
 * the same language mode. Recorded tags use their install digest (the plan has
 * just verified them against it); anything else is hashed.
 */
export async function runFingerprint(plan: RunPlan): Promise<string> {
  const verified = new Set(plan.verification.map((entry) => entry.release))
  const releases: Array<[string, string]> = []
  for (const release of plan.releases) {
    const record = verified.has(release.release) ? readRecordHead(plan.moduleDir, release.release) : null
    releases.push([release.release, record?.digest ?? treeDigest(await readReleaseTree(release.path, release.release))])
  }

  const {localpuppet_run_id: _runId, ...parameters} = plan.enc.parameters
  const manifest = plan.manifest.source === 'empty' ? 'empty' : createHash('sha256').update(await readFile(plan.manifest.path)).digest('hex')
  const {strict, strictVariables} = plan.languageMode
  const puppet = {implementation: plan.puppet.implementation, version: plan.puppet.version}
  // A layered input: every layer's digest too (the computed document is in enc already); a flat input's fingerprint is as before.
  const layers = plan.layers ? {layers: plan.layers.layers.map((layer) => [layer.name, layer.digest])} : {}
  // Secrets are out of the ENC: their digests (what a Secret serialises to) stand for them, so a changed password runs.
  // One with no keyed digest (the node key unreadable: the run stops at 78 before Puppet) matches no earlier run, so --if-changed never skips it.
  const secrets = plan.secrets ? {secrets: Object.fromEntries(Object.entries(plan.secrets).map(([key, secret]) => [key, secret.digest === NO_SECRET_DIGEST ? `unkeyed ${randomUUID()}` : secret]))} : {}
  const data = {releases, enc: {...plan.enc, parameters}, facts: plan.facts, manifest, noop: plan.noop, puppetArgs: plan.puppetArgs, languageMode: {strict, strictVariables}, puppet, ...layers, ...secrets}
  return `sha256:${createHash('sha256').update(stringifyJson(data)).digest('hex')}`
}
