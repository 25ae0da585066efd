import {resolve} from 'node:path'

import {ConflictError, NotFoundError, UsageError} from '../errors.js'
import {type ReleaseRef, parseReleaseRef} from '../release/release-ref.js'
import {type RepositoryIndex, tagInIndex} from '../repository/repository-index.js'
import {usageReleaseRef} from './channel-ref.js'
import type {IndexUpdate} from '../repository/index-update.js'
import {own} from '../util/own.js'
import {type YankRecord, usageReason} from '../repository/channel-records.js'
import {type RecordsUpdateOptions, updateRecords} from './records-update.js'

export interface YankOptions extends RecordsUpdateOptions {
  /** The tag to yank: `foo/tags/1.5.0`. */
  release: string
  reason: string
}

export interface YankResult extends IndexUpdate {
  repo: string
  release: string
  yanked: YankRecord
  /** false: it was yanked already (its first record kept; the index is still re-signed). */
  changed: boolean
}

/**
 * Yanks a published tag: it stays in the index (listed, with when and why), but no channel or
 * node input may name it from now on, ranges no longer resolve to it, and nodes do not newly
 * install it. Refused (73) while a channel or a node input names it: they are moved first
 * (`channel back`, `promote`, `publish --node`), so a yank never strands a node with nothing to
 * take. Yanking a yanked tag keeps its first record.
 */
export async function yankTag(options: YankOptions): Promise<YankResult> {
  const repo = resolve(options.repo)
  const ref = usageReleaseRef(options.release, 'yank')
  if (ref.kind !== 'tag') throw new UsageError(`yank ${options.release}: name an exact tag (APP/tags/TAG), not a ${ref.kind}`)
  const reason = usageReason(options.reason, '--reason')
  const updated = await updateRecords({...options, repo}, ({index, by, at}) => {
    const published = own(own(index.apps, ref.app)?.tags, ref.tag)
    if (published === undefined) throw new NotFoundError(`${options.release} is not published in ${repo}`)
    if (published.yanked) return {yanked: published.yanked, changed: false}
    const namedBy = [
      ...Object.entries(index.apps[ref.app].channels ?? {})
        .filter(([, tag]) => tag === ref.tag)
        .map(([channel]) => `${ref.app}/channels/${channel}`),
      ...Object.entries(index.nodes ?? {})
        .filter(([, input]) => namesExactly(input.app, ref.app, ref.tag))
        .map(([node]) => `node ${node}'s input`),
      ...Object.entries(index.nodes ?? {})
        .filter(([, input]) => leftWithNothing(index, input.app, ref.app, ref.tag))
        .map(([node, input]) => `node ${node}'s input (${input.app}) would have no tag left`),
    ]
    if (namedBy.length > 0) {
      throw new ConflictError(`${options.release} is not yanked: ${namedBy.join(', ')} name${namedBy.length === 1 ? 's' : ''} it; move ${namedBy.length === 1 ? 'it' : 'them'} to another tag first`, [
        `localpuppet channel back APP/channels/NAME --repo ${options.repo}, or promote another tag; publish --node NODE --input FILE for an input`,
      ])
    }

    const yanked: YankRecord = {at, reason, by}
    published.yanked = yanked
    return {yanked, changed: true}
  })
  return {repo, release: `${ref.app}/tags/${ref.tag}`, ...updated}
}

/**
 * Whether an input's range resolves to this tag now and to no tag once it is yanked (a range
 * never resolves to a yanked tag): its node would then refuse every run, whatever it has.
 */
function leftWithNothing(index: RepositoryIndex, text: string, app: string, tag: string): boolean {
  let ref: ReleaseRef
  try {
    ref = parseReleaseRef(text, 'input')
  } catch {
    return false
  }

  if (ref.kind !== 'range' || ref.app !== app || ref.range === tag || tagInIndex(index, ref) !== tag) return false
  const entry = index.apps[app]
  const view: RepositoryIndex = {...index, apps: {...index.apps, [app]: {...entry, tags: {...entry.tags, [tag]: {...entry.tags[tag], yanked: {at: '', reason: '', by: null}}}}}}
  return tagInIndex(view, ref) === undefined
}

/** Whether an input's app (as written) names exactly this tag: the tag itself, or a range that is its name. */
function namesExactly(text: string, app: string, tag: string): boolean {
  try {
    const ref = parseReleaseRef(text, 'input')
    return ref.app === app && ((ref.kind === 'tag' && ref.tag === tag) || (ref.kind === 'range' && ref.range === tag))
  } catch {
    return false
  }
}
