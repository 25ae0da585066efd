import {LocalpuppetError, NotFoundError, ReleaseError, UsageError} from '../errors.js'
import {type WantedIndexOptions, readWantedIndex, resolveInIndex} from '../source/wanted-now.js'
import {parseReleaseRef} from '../release/release-ref.js'
import {closest} from '../util/did-you-mean.js'
import {redactUrl} from '../util/terminal-text.js'

/*
 * A rollout's REF, judged on the operator's machine before any node is touched: a typo
 * (`rollout lst`) must not become a survey, a record and `apply app=lst` sent to every
 * node, each refusing it into its own history.
 */

/** The words after `rollout` that are commands of their own: a REF close to one is a typo of it. */
export const ROLLOUT_COMMANDS = ['list', 'show', 'revert'] as const

/** REF's syntax (64, with the command it was probably meant to be). */
export function checkRefSyntax(ref: string): void {
  try {
    parseReleaseRef(ref, 'REF')
  } catch (error) {
    if (!(error instanceof ReleaseError)) throw error
    const word = ref.trim()
    const command = /^[A-Za-z]+$/.test(word) ? closest(word, ROLLOUT_COMMANDS) : undefined
    throw new UsageError(command ? `${error.message} (did you mean localpuppet rollout ${command}?)` : error.message, command ? [] : error.suggestions)
  }
}

export interface RefInSource {
  /** The repository read (--source, or the source setting). */
  source: string
  /** The tag REF names there now (a range's newest match, a channel's tag). */
  release: string
  warnings: string[]
}

/**
 * REF in the configured source's signed index, read as a node reads it (verified, judged
 * fresh) and remembered nowhere: 66 once, here, when the repository has no such release.
 * Null when no source is configured (or apt), and for trunk and branches (no repository
 * holds them): then only the syntax was checked.
 */
export async function checkRefInSource(ref: string, options: WantedIndexOptions): Promise<RefInSource | null> {
  const parsed = parseReleaseRef(ref, 'REF')
  if (parsed.kind === 'trunk' || parsed.kind === 'branch') return null
  const read = await readWantedIndex(options).catch((error: unknown) => {
    // Whatever the source said, the operator learns why it was read at all.
    if (error instanceof LocalpuppetError) error.suggestions.push('REF is checked in the source before any node is asked (--source, or the source setting)')
    throw error
  })
  if (read === null) return null
  const {release, why} = resolveInIndex(ref, read.index)
  if (release === null) {
    throw new NotFoundError(`REF ${why ?? ref} (source ${redactUrl(read.source)}): no node was asked`)
  }

  return {source: redactUrl(read.source), release, warnings: read.warnings}
}
