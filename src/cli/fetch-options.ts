import type {ConfiguredFetch} from '../lib/source/fetch.js'
import type {FetchResult} from '../lib/source/release-source.js'
import {terminalText} from '../lib/util/terminal-text.js'
import {formatBytes, progressPrinter} from './render/progress.js'

/** The flags fetch, apply --fetch and plan --fetch share. */
export interface FetchFlagValues {
  'module-dir': string
  source?: string
  trust?: string[]
  insecure: boolean
  'allow-untrusted'?: boolean
  'accept-repository'?: string
  'repository-id'?: string
}

/** fetch: the configured source (flag, env, config file), with download progress on a terminal only. */
export async function fetchFromSource(refs: string[], flags: FetchFlagValues, options: {timeoutSeconds?: number; progress: boolean}): Promise<FetchResult> {
  const {fetchConfigured} = await import('../lib/source/fetch.js')
  const fetch: ConfiguredFetch = {moduleDir: flags['module-dir'], source: flags.source, trust: flags.trust, insecure: flags.insecure, allowUntrusted: flags['allow-untrusted'], acceptRepository: flags['accept-repository'], repositoryId: flags['repository-id']}
  const printer = downloadProgress(options.progress)
  try {
    return await fetchConfigured(refs, fetch, {timeoutSeconds: options.timeoutSeconds, onProgress: printer ? (p) => printer.update(p) : undefined})
  } finally {
    printer?.done()
  }
}

/** A download progress line on standard error when it is a terminal and a person reads it. */
export function downloadProgress(wanted: boolean): ReturnType<typeof progressPrinter> | undefined {
  return wanted && process.stderr.isTTY ? progressPrinter(process.stderr) : undefined
}

/** `fetched foo/tags/1.5.0 (3.1 MiB)` lines for a person. */
export function describeFetch(result: FetchResult): string[] {
  const input = result.nodeInput
  const document = result.nodeDocument ? `, through its own document version ${result.nodeDocument.version ?? 'none'}` : ''
  const inputLine = input ? [`input of node ${input.node} from ${result.source}${document}: ${input.status === 'updated' ? 'updated' : input.status === 'unchanged' ? 'unchanged' : 'read'} (sha256 ${input.sha256.slice(0, 12)})`] : []
  const lines = inputLine.concat(result.releases.map((r) =>
    r.status === 'installed'
      ? `fetched ${r.release} from ${result.source} (${formatBytes(r.bytes)}${r.delivery === 'objects' && r.files ? `: ${deliveryCounts(r.files)}` : ''}${r.modulepath.length > 1 ? `, with ${r.modulepath.slice(1).join(', ')}` : ''})`
      : `${r.release}: already present`,
  ))
  // Names the repository's index gave, and the source without its credentials (the label already is).
  return lines.map((line) => terminalText(line))
}

/** `1 file shared with installed tags, 2 files written from 1 download`: shared and written add up to the files installed. */
function deliveryCounts(files: {shared: number; written: number; downloaded: number}): string {
  const count = (n: number, what: string) => `${n} ${what}${n === 1 ? '' : 's'}`
  return `${count(files.shared, 'file')} shared with installed tags, ${count(files.written, 'file')} written from ${count(files.downloaded, 'download')}`
}
