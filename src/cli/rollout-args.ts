import {UsageError} from '../lib/errors.js'
import {fleetFlags} from './fleet-flags.js'

/** Flags that decide a rollout: a resumed one keeps those it was started with. */
const SETTING_FLAGS = ['canary', 'batch', 'window', 'max-failures', 'soak', 'deadline', 'revert', 'only-outdated', 'noop', 'fetch', 'save', 'timeout', 'source', 'trust', 'insecure'] as const

/** The flags typed on the command line (not those that took a default). */
export function flagsGiven(raw: Array<{type: string}>): Set<string> {
  return new Set(raw.filter((token) => token.type === 'flag').map((token) => (token as unknown as {flag: string}).flag))
}

/**
 * rollout's arguments and flags, judged before any node is asked (64): --resume takes
 * neither REF nor a setting, REF's syntax (checkRefSyntax, loaded by the command only
 * when it runs), one REF only, --source only with a REF.
 */
export function judgeRolloutArgs(args: {ref?: string; extra?: string}, resume: string | undefined, given: Set<string>, checkRefSyntax: (ref: string) => void): void {
  if (resume !== undefined) {
    const extra = [...SETTING_FLAGS, ...Object.keys(fleetFlags)].filter((name) => given.has(name))
    if (args.ref !== undefined || extra.length > 0) {
      throw new UsageError(`--resume continues a rollout with the settings and nodes it was recorded with: ${args.ref === undefined ? '' : 'REF, '}${extra.map((name) => `--${name}`).join(', ')} cannot be given with it`)
    }
  }

  if (args.ref !== undefined) checkRefSyntax(args.ref)
  if (args.extra !== undefined) throw new UsageError(`unexpected argument ${JSON.stringify(args.extra)}: rollout takes one REF`)
  if (args.ref === undefined && resume === undefined && given.has('source')) throw new UsageError('--source checks REF in the repository: give a REF, or drop --source')
}
