import test from 'ava'

import {runFingerprint} from '../../../src/lib/run/fingerprint.js'
import type {RunPlan} from '../../../src/lib/run/run-plan.js'
import {digestKeyOf} from '../../../src/lib/secrets/secret-digest.js'
import {Secret} from '../../../src/lib/util/secret.js'

/** The parts of a plan the fingerprint reads, for a release-less plan (nothing on disk to hash). */
function plan(fields: Partial<RunPlan> = {}): RunPlan {
  return {
    releases: [],
    verification: [],
    moduleDir: '/nowhere',
    enc: {classes: {}, parameters: {localpuppet_run_id: 'x'}, environment: 'production'},
    manifest: {path: '/nowhere/empty.pp', source: 'empty'},
    facts: {},
    noop: false,
    puppetArgs: [],
    languageMode: {strict: 'error', strictVariables: true, pinned: null},
    puppet: {command: 'puppet', path: '/usr/bin/puppet', found: 'PATH', implementation: 'puppet', version: '8.10.0'},
    ...fields,
  } as unknown as RunPlan
}

test('the fingerprint changes with the language mode and with the Puppet, not with where the mode was pinned or the run id', async (t) => {
  const base = await runFingerprint(plan())
  t.is(await runFingerprint(plan({enc: {classes: {}, parameters: {localpuppet_run_id: 'y'}, environment: 'production'} as unknown as RunPlan['enc']})), base)
  t.is(await runFingerprint(plan({languageMode: {strict: 'error', strictVariables: true, pinned: 'app/tags/1.0.0/manifest.yaml'}})), base)
  t.not(await runFingerprint(plan({languageMode: {strict: 'error', strictVariables: false, pinned: null}})), base)
  t.not(await runFingerprint(plan({languageMode: {strict: 'warning', strictVariables: true, pinned: null}})), base)
  t.not(await runFingerprint(plan({puppet: {command: 'puppet', path: '/usr/bin/puppet', found: 'PATH', implementation: 'puppet', version: '7.23.0'}})), base)
  t.not(await runFingerprint(plan({puppet: {command: 'puppet', path: '/usr/bin/puppet', found: 'PATH', implementation: 'openvox', version: '8.10.0'}})), base)
})

test('issue 37: the fingerprint changes when a secret (kept out of the ENC) changes, and not when the same secret is given again', async (t) => {
  const key = digestKeyOf('AGE-SECRET-KEY-1QQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQ')
  const withSecret = (value: string) => runFingerprint(plan({secrets: {'db::password': new Secret(value, key)}}))
  const base = await withSecret('hunter2')
  t.is(await withSecret('hunter2'), base)
  t.not(await withSecret('hunter3'), base)
  t.not(await runFingerprint(plan()), base)
  // With no node key to key the digest, no two fingerprints match: --if-changed never skips a changed secret.
  const unkeyed = plan({secrets: {'db::password': new Secret('hunter2')}})
  t.not(await runFingerprint(unkeyed), await runFingerprint(unkeyed))
})
