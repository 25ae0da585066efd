// Issue 26, the hostile campaign: a rollout record edited by another user (useradd), as
// that user (runuser), not just chowned to them. `rollout show`, `rollout list` and
// `rollout --resume` each refuse it (77) in one line naming what is at fault, before the
// record is believed: a resumed rollout would start runs on nodes the forged record names.
import {chmod, chown, readFile, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import test, {type ExecutionContext} from 'ava'

import {cli} from '../helpers/cli.js'
import {asHostile, hostileUid} from '../helpers/hostile-user.js'
import {recordedRollout} from '../helpers/rollout-record.js'
import {tempDir} from '../helpers/temp.js'

const uid = hostileUid()
const asRoot = uid === null ? test.skip : test

/** An interrupted rollout recorded in a state dir the hostile user can reach (0755 down to the rollouts dir), and a forged copy of its record they could write. */
async function setup(t: ExecutionContext) {
  const dir = await tempDir(t)
  await chmod(dir, 0o755)
  const state = join(dir, 'state')
  const {dir: rollouts, store} = await recordedRollout(state, 'interrupted')
  await chmod(state, 0o755)
  await chmod(rollouts, 0o755)
  const id = store.record.id
  const record = join(rollouts, `${id}.json`)
  // The forgery: the remaining nodes become the attacker's hosts.
  const forged = join(dir, 'forged.json')
  await writeFile(forged, (await readFile(record, 'utf8')).replaceAll('"c"', '"evil.example.com"'), {mode: 0o644})
  return {dir, state, rollouts, id, record, forged}
}

/** show, list and --resume: each 77 in one line matching `message`. */
async function allRefused(t: ExecutionContext, state: string, id: string, message: RegExp) {
  for (const args of [['rollout', 'show', id], ['rollout', 'list'], ['rollout', '--resume', id]]) {
    const result = await cli([...args, '--state-dir', state])
    t.is(result.exitCode, 77, `${args.join(' ')}: ${result.stderr}`)
    const lines = result.stderr.trimEnd().split('\n').filter((line) => !line.startsWith('  '))
    t.is(lines.length, 1, `${args.join(' ')}: one line: ${result.stderr}`)
    t.regex(lines[0], message, args.join(' '))
    t.notRegex(result.stdout, /evil/, `${args.join(' ')}: nothing of the forged record shown`)
  }
}

asRoot('a rollout record swapped by another user in a rollouts directory they own: show, list and --resume refuse (77) naming the directory', async (t) => {
  const {state, rollouts, id, record, forged} = await setup(t)
  await chown(rollouts, uid!, uid!)
  // Root's record (0600) cannot be read or written by them, but the directory is theirs: they replace it.
  asHostile(`cp ${forged} ${rollouts}/.new && mv -f ${rollouts}/.new ${record}`)
  t.regex(await readFile(record, 'utf8'), /evil\.example\.com/, 'the attack worked')
  await allRefused(t, state, id, new RegExp(`^localpuppet: rollouts directory ${rollouts} is not trusted: owned by uid ${uid}`))
})

asRoot('a rollout record another user can write, edited by them in place: show, list and --resume refuse (77) naming the record', async (t) => {
  const {state, id, record, forged} = await setup(t)
  await chmod(record, 0o666)
  asHostile(`cat ${forged} > ${record}`)
  t.regex(await readFile(record, 'utf8'), /evil\.example\.com/, 'the attack worked')
  await allRefused(t, state, id, new RegExp(`^localpuppet: rollout record ${record} is not trusted: writable by group and others`))
})

asRoot('a rollout record planted by another user in a rollouts directory anyone can write (sticky, like /tmp): refused (77) naming the directory', async (t) => {
  const {state, rollouts, id, forged} = await setup(t)
  await chmod(rollouts, 0o1777)
  const planted = id.replace(/-[0-9a-f]+$/, '-beef')
  asHostile(`sed 's/${id}/${planted}/' ${forged} > ${rollouts}/${planted}.json`)
  t.not(planted, id)
  await allRefused(t, state, planted, new RegExp(`^localpuppet: rollouts directory ${rollouts} is not trusted: writable by group and others`))
})
