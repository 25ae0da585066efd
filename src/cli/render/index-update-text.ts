import type {IndexUpdate} from '../../lib/repository/index-update.js'
import {terminalText} from '../../lib/util/terminal-text.js'

/**
 * The last line of a publish: the index written (its version and expiry), or, when only node
 * documents were (a documents-only publish of node inputs), those and the index as it stands,
 * so no one reads an earlier index's version and expiry as what this publish wrote.
 */
export function indexUpdateLine(result: IndexUpdate): string {
  const signed = result.signedBy ? `, signed by ${result.signedBy}` : ''
  if (result.indexWritten) return terminalText(`repository ${result.repository}, index version ${result.version}, expires ${result.expires}${signed}`)
  const {written, removed, version, expires} = result.nodeDocuments
  const documents =
    written === 0 ? 'no node document written' : `${written === 1 ? 'node document' : `${written} node documents, newest`} version ${version}, expires ${expires}${signed}`
  const gone = removed === 0 ? '' : `; ${removed} node document${removed === 1 ? '' : 's'} removed`
  return terminalText(`repository ${result.repository}: ${documents}${gone}; index.json unchanged (version ${result.version}, expires ${result.expires})`)
}
