import {chmod, mkdtemp, readFile, rm, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'

import {type McoOptions, McoTransport} from '../../src/lib/rollout/transports/mco.js'

/** A fake mco: records its arguments, prints the replies it was given, exits as told. */
export async function fakeMco(
  t: {teardown(fn: () => Promise<void>): void},
  replies: unknown,
  exit = 0,
  stderr = '',
  options: Partial<McoOptions> = {},
): Promise<{transport: McoTransport; dir: string; args: () => Promise<string[]>}> {
  const dir = await mkdtemp(join(tmpdir(), 'localpuppet-fake-mco-'))
  t.teardown(() => rm(dir, {recursive: true, force: true}))
  await writeFile(join(dir, 'replies.json'), typeof replies === 'string' ? replies : JSON.stringify(replies))
  const mco = join(dir, 'mco')
  await writeFile(mco, `#!/bin/sh\nprintf '%s\\n' "$@" > ${dir}/args\ncat ${dir}/replies.json\necho ${JSON.stringify(stderr)} >&2\nexit ${exit}\n`)
  await chmod(mco, 0o755)
  const transport = new McoTransport({mco, connection: ['--config', '/etc/mco.cfg'], discovery: ['-W', 'role=web'], replyTimeout: null, discoveryTimeout: 2, ...options})
  t.teardown(() => transport.close())
  return {transport, dir, args: async () => (await readFile(join(dir, 'args'), 'utf8')).trim().split('\n')}
}

export const reply = (sender: string, data: Record<string, unknown>, statuscode = 0, statusmsg = 'OK') => ({sender, statuscode, statusmsg, data})
