import {mkdir, rm, writeFile} from 'node:fs/promises'
import {basename, join, resolve} from 'node:path'

import {InputError, describeFsError} from '../errors.js'
import {isMapping} from '../util/json.js'
import type {Secret} from '../util/secret.js'
import {readBoundedFile} from '../util/bounded-read.js'

/**
 * How secrets reach Puppet as Sensitive, with no plain text on disk. Puppet 7 and 8 give a
 * class parameter set by the ENC exactly the value printed (a String, which a parameter
 * typed Sensitive refuses: "expects a Sensitive[String] value, got String"); the exec
 * ENC's YAML is read with safe_load, so no tag can make it Sensitive. A value found by
 * Hiera's automatic parameter lookup, though, is converted by `lookup_options: {KEY:
 * {convert_to: Sensitive}}` (Puppet::Pops::Lookup::LookupAdapter#convert_result). So a
 * run with secrets gets a global Hiera layer (`--hiera_config`) whose one backend is a
 * data_hash function (a small module in the run directory, on the modulepath) that asks
 * localpuppet (`node-key --hiera FILE`) to open the run's secrets, kept encrypted to the
 * node's own key, and returns each already wrapped in Sensitive. Not lookup_options'
 * `convert_to`: that converts after Hiera has found the value, and under `--debug` Puppet
 * explains every automatic parameter lookup ("Found key: "db::password" value: ...")
 * with the value found, in clear, on the screen and in the run's puppet.log. The plain
 * values exist only in the pipe between the two processes and in Puppet's memory; Puppet
 * prints a Sensitive value as [redacted] in its logs, reports, show_diff and explanations.
 */

/** Where a run keeps its secrets and the Hiera layer that delivers them. */
export function secretRunFiles(runDir: string): {sealed: string; hiera: string; modules: string} {
  return {sealed: join(runDir, 'secrets.age'), hiera: join(runDir, 'hiera.yaml'), modules: join(runDir, 'secrets-modules')}
}

/** The Puppet function that asks localpuppet for the secrets (once per compile), as Hiera's data_hash backend. */
const DATA_FUNCTION = `# Written by localpuppet for one run: Hiera's data_hash backend for the run's secrets.
require 'json'
require 'open3'
Puppet::Functions.create_function(:'localpuppet_secrets::data') do
  dispatch :data do
    param 'Hash', :options
    param 'Puppet::LookupContext', :context
  end

  def data(options, context)
    return context.cached_value('data') if context.cache_has_key('data')
    out, status = Open3.capture2(*options['command'])
    raise Puppet::DataBinding::LookupError, "localpuppet secrets: #{options['command'].join(' ')} exited #{status.exitstatus}" unless status.success?
    begin
      data = JSON.parse(out)
    rescue JSON::ParserError
      # Its message quotes the text, which holds the secrets.
      raise Puppet::DataBinding::LookupError, "localpuppet secrets: #{options['command'].join(' ')} printed no JSON"
    end
    # Sensitive before Hiera sees them: its explanation (--debug) prints what it found.
    context.cache('data', data.to_h { |key, value| [key, Puppet::Pops::Types::PSensitiveType::Sensitive.new(value)] })
  end
end
`

/** Arguments puppet gets for a run with secrets: the Hiera layer, and the module of its backend (added to --modulepath). */
export function secretPuppetArgs(runDir: string): {args: string[]; modulepath: string} {
  const files = secretRunFiles(runDir)
  return {args: ['--hiera_config', files.hiera], modulepath: files.modules}
}

/**
 * Writes a run's secrets, encrypted to the node's own key (so `--replay` and rollback open
 * them again, and nothing on disk holds them in clear), the Hiera layer and its backend.
 * `command`: how the backend runs localpuppet (`node bin/run.js`). The node's key is
 * needed (78 when missing, before Puppet starts).
 */
export async function writeSecretFiles(runDir: string, stateDir: string, secrets: Record<string, Secret>, command: string[]): Promise<void> {
  const [{encryptDocument}, {readNodeKey}] = await Promise.all([import('./age.js'), import('./node-key.js')])
  const {recipient} = await readNodeKey(stateDir)
  const files = secretRunFiles(runDir)
  const plain = Object.fromEntries(Object.entries(secrets).map(([key, secret]) => [key, secret.reveal()]))
  const sealed = await encryptDocument(Buffer.from(JSON.stringify(plain)), [recipient])
  const hiera = {
    version: 5,
    hierarchy: [{name: 'localpuppet secrets', data_hash: 'localpuppet_secrets::data', options: {command: [...command, 'node-key', '--hiera', files.sealed, '--state-dir', stateDir]}}],
  }
  const functions = join(files.modules, 'localpuppet_secrets', 'lib', 'puppet', 'functions', 'localpuppet_secrets')
  try {
    await writeFile(files.sealed, sealed, {mode: 0o600})
    // JSON is YAML: Puppet reads it as hiera.yaml.
    await writeFile(files.hiera, JSON.stringify(hiera, null, 1) + '\n', {mode: 0o600})
    await mkdir(functions, {recursive: true, mode: 0o700})
    await writeFile(join(functions, 'data.rb'), DATA_FUNCTION, {mode: 0o600})
  } catch (error) {
    // A full disk midway: none of them left (a secrets.age cut short would later read as tampered, a hiera.yaml without its backend as Puppet's error).
    await Promise.all([files.sealed, files.hiera, files.modules].map((path) => rm(path, {recursive: true, force: true}).catch(() => {})))
    throw describeFsError(error, `secrets of run ${runDir}`)
  }
}

/** A run's secrets opened with the node's key: Hiera key → value (65 when they cannot be opened or are not what a run writes). */
export async function openRunSecrets(sealedPath: string, stateDir: string): Promise<Record<string, string>> {
  const {openNodeDocument} = await import('./open-input.js')
  let bytes: Buffer
  try {
    bytes = await readBoundedFile(sealedPath, {maxBytes: 16 * 1024 * 1024, label: `secrets ${sealedPath}`, error: (message) => new InputError(message), noFollow: true})
  } catch (error) {
    if (error instanceof InputError) throw error
    throw describeFsError(error, `secrets ${sealedPath}`)
  }

  const {text} = await openNodeDocument(bytes.toString('latin1'), `secrets ${sealedPath}`, stateDir, {
    encrypted: true,
    notForThisKey: {why: 'that run kept them for the key the node had then (re-keyed since)', hint: "that run cannot be replayed with this key: apply the node's current input instead"},
  })
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    // JSON.parse's message quotes the text: the secrets.
    parsed = null
  }

  if (!isMapping(parsed) || Object.values(parsed).some((value) => typeof value !== 'string')) throw new InputError(`secrets ${sealedPath}: not what a run writes`)
  return parsed as Record<string, string>
}

/**
 * `node-key --hiera FILE`: the run's secrets by Hiera key, which the Hiera backend wraps
 * in Sensitive. FILE must be a run's `secrets.age` inside the state dir,
 * trusted as the run's files are (77 otherwise).
 */
export async function hieraDataOfRun(sealedPath: string, stateDir: string): Promise<Record<string, string>> {
  const {runsDir} = await import('../state/state-dir.js')
  const {UsageError} = await import('../errors.js')
  const {findTrustProblem, isInside, refuseUnlessAllowed} = await import('../util/trusted-path.js')
  const path = resolve(sealedPath)
  if (basename(path) !== 'secrets.age' || !isInside(path, runsDir(resolve(stateDir)))) throw new UsageError(`--hiera ${sealedPath}: not a run's secrets.age in ${runsDir(stateDir)}`)
  refuseUnlessAllowed(findTrustProblem(path, {what: "run's secrets", overridable: false}), {allow: false, overridable: false})
  return openRunSecrets(path, stateDir)
}
