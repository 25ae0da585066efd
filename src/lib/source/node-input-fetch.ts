import {createHash} from 'node:crypto'
import {readFile} from 'node:fs/promises'
import {dirname} from 'node:path'

import {settingList} from '../config/settings.js'
import type {NodeIdentity} from '../config/node-identity.js'
import {UsageError, describeFsError} from '../errors.js'
import {type NodeInput, parseNodeInput} from '../input/node-input.js'
import {prepareFileAtomic} from '../util/atomic-write.js'
import {findTrustProblem, refuseUnlessAllowed} from '../util/trusted-path.js'
import {configuredRepositoryId, configuredSource, openSource, type ConfiguredFetch} from './fetch.js'
import type {FetchOptions, FetchResult} from './release-source.js'

/** The node input the fetch brought: its node, sha256, and whether the input file changed. */
export interface FetchedNodeInput {
  node: string
  sha256: string
  /** updated: the input file was rewritten; unchanged: it already held these bytes; not kept: plan, which writes no input. */
  status: 'updated' | 'unchanged' | 'not kept'
}

export interface NodeFetch {
  input: NodeInput
  text: string
  nodeInput: FetchedNodeInput
  result: FetchResult
  /** The layers the input names, as verified against the same index: what the run merges. */
  layers?: import('../layers/resolve-layers.js').LayerSource
}

/**
 * `apply --fetch` on a node whose input comes from the repository: one read of the signed
 * index gives the node's own input (verified against the index's sha256: 65 otherwise,
 * nothing kept) and the releases its app needs, which are fetched. Only then, with `keep`,
 * is the input written over the node's input file (atomically; only when it changed), so
 * that status, plan, --save and the finish hook see it, and a run without the repository
 * applies it. The input file's directory must be one only root can write (77).
 */
export async function fetchNodeInput(
  inputPath: string,
  identity: NodeIdentity,
  fetch: ConfiguredFetch,
  options: Pick<FetchOptions, 'timeoutSeconds' | 'onProgress'> & {
    keep: boolean
    /** The node's input as soon as it is verified and parsed, before its release is fetched: a refusal after it records what the node follows. */
    onInput?: (input: NodeInput) => void
    /** Where the node's key is (secrets/node-key.ts): an encrypted input is opened with it. */
    stateDir: string
  },
): Promise<NodeFetch> {
  if (inputPath === '-') throw new UsageError('input_from: repository: the input comes from the repository; give no input on standard input')
  const source = await configuredSource(fetch)
  const trust = await settingList('trust', fetch.trust)
  const expectedRepository = await configuredRepositoryId(fetch)
  const fetchOptions: FetchOptions = {moduleDir: fetch.moduleDir, trust, insecure: fetch.insecure, timeoutSeconds: options.timeoutSeconds, allowUntrusted: fetch.allowUntrusted, expectedRepository, onProgress: options.onProgress}
  const {assertTrustedModuleDir} = await import('../install/install-record.js')
  const untrusted = assertTrustedModuleDir(fetch.moduleDir, fetch.allowUntrusted)
  if (options.keep) {
    // Root writes the file it will apply next: a directory others can write could swap it after.
    const problem = findTrustProblem(dirname(inputPath), {what: 'input directory'})
    refuseUnlessAllowed(problem, {allow: fetch.allowUntrusted})
    if (problem) untrusted.push(problem.message)
  }

  const opened = await openSource(source, fetchOptions)
  try {
    if (!opened.nodeInput) throw new UsageError(`input_from: repository needs a release repository as the source, not ${source}`)
    // What the node kept last time: when the index lists the same sha256, it is not downloaded again.
    const before = options.keep
      ? await readFile(inputPath).catch((error: NodeJS.ErrnoException) => {
          if (error.code === 'ENOENT') return null
          throw describeFsError(error, `input file ${inputPath}`)
        })
      : null
    const got = await opened.nodeInput(identity.node, fetchOptions, before)
    const label = `${got.location} (input of node ${identity.node})`
    // An encrypted input is opened with the node's key before anything is kept: a key missing (78) or a ciphertext not for it (65) keeps nothing new.
    const {openNodeDocument} = await import('../secrets/open-input.js')
    const {text} = await openNodeDocument(got.text, label, options.stateDir, {encrypted: got.published.encrypted === 'age'})
    const input = parseNodeInput(text, label)
    options.onInput?.(input)
    // The layers it names, from the same signed index, verified, before anything is kept.
    const {abortAll, commitAll, fetchNodeLayers, prepareKeptLayers, keptLayersDir} = await import('../layers/fetch-layers.js')
    const layers = input.layers?.length && opened.nodeLayer ? await fetchNodeLayers(input, (name) => opened.nodeLayer!(name, fetchOptions), source) : null
    const result = await opened.fetch([input.app.text], fetchOptions)
    let status: FetchedNodeInput['status'] = 'not kept'
    if (options.keep) {
      // The layers and the input written whole beside their kept copies, then renamed in together: a full disk keeps the last ones, never a mix.
      const kept = layers ? await prepareKeptLayers(keptLayersDir(inputPath), layers.layers, fetch.allowUntrusted === true) : {untrusted: [], files: []}
      untrusted.push(...kept.untrusted)
      const same = before !== null && createHash('sha256').update(before).digest('hex') === got.sha256
      if (!same) {
        // The signed bytes themselves: the kept copy matches the index, so the next run downloads nothing.
        kept.files.push(
          await prepareFileAtomic(inputPath, got.bytes, 0o644).catch(async (error: unknown) => {
            await abortAll(kept.files)
            throw describeFsError(error, `input file ${inputPath}`)
          }),
        )
      }

      commitAll(kept.files)
      status = same ? 'unchanged' : 'updated'
    }

    const kept = options.keep ? {...input, source: inputPath} : input
    return {
      input: kept,
      text,
      nodeInput: {node: identity.node, sha256: got.sha256, status},
      result: {...result, nodeInput: {node: identity.node, sha256: got.sha256, status}, untrusted: [...new Set([...untrusted, ...(result.untrusted ?? [])])]},
      ...(layers ? {layers: layers.source} : {}),
    }
  } finally {
    await opened.close()
  }
}
