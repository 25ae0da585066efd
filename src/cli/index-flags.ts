import {Flags} from '@oclif/core'

/** The flags of a command that rewrites a repository's signed index (publish, promote, channel back, channel policy, repository yank). */
export const indexWriteFlags = {
  repo: Flags.string({description: 'the repository directory', required: true, helpValue: 'DIR'}),
  sign: Flags.string({description: 'sign index.json with this Ed25519 private key (PEM)', helpValue: 'KEY.pem'}),
  expires: Flags.string({description: 'how long nodes believe the new index (default 30d)', helpValue: 'DURATION'}),
}

/** --expires as ms, or undefined. */
export async function expiresInMs(expires: string | undefined): Promise<number | undefined> {
  if (expires === undefined) return undefined
  const {parseDuration} = await import('../lib/util/duration.js')
  return parseDuration(expires, '--expires')
}

/** The last line of a command that rewrote the index: its id, new version, expiry and signer. */
export function indexLine(result: {repository: string; version: number; expires: string; signedBy: string | null}): string {
  return `repository ${result.repository}, index version ${result.version}, expires ${result.expires}${result.signedBy ? `, signed by ${result.signedBy}` : ''}`
}
