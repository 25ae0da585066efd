import {hostname} from 'node:os'
import {isAbsolute} from 'node:path'

import {DEFAULT_INPUT, DEFAULT_MODULE_DIR} from '../defaults.js'
import {InputError, LocalpuppetError, describeFsError} from '../errors.js'
import {defaultStateDir} from '../state/state-dir.js'
import {decodeUtf8Strict, readBoundedFile} from '../util/bounded-read.js'
import {assertTrustedPath} from '../util/trusted-path.js'

/** The node's one configuration file, and the variable that moves it. */
export const DEFAULT_CONFIG_FILE = '/etc/localpuppet/config.yaml'
export const CONFIG_ENV = 'LOCALPUPPET_CONFIG'

export type SettingValue = string | string[] | null

interface SettingSpec {
  /** The environment variable that overrides the file. */
  env: string
  /** The command-line flag that overrides everything (`--` arguments for puppet_args). */
  flag: string | null
  /** `path`: an absolute path in the file; `command`: a name on PATH or an absolute path; `url`: a URL or an absolute directory; `list`/`paths`: a list of strings/absolute paths; `id`: a repository id (32 hex digits). */
  type: 'path' | 'command' | 'url' | 'list' | 'paths' | 'name' | 'choice' | 'id'
  /** For `choice`: the values allowed. */
  choices?: readonly string[]
  /** The built-in default (null: unset). */
  default: (env: NodeJS.ProcessEnv) => SettingValue
  description: string
}

/**
 * Every node setting, in the order `localpuppet config` lists them. Adding a key is one
 * entry here: the file, the environment and `config` pick it up from this table.
 */
export const SETTINGS = {
  module_dir: {env: 'LOCALPUPPET_MODULE_DIR', flag: '--module-dir', type: 'path', default: () => DEFAULT_MODULE_DIR, description: 'where releases live'},
  state_dir: {env: 'LOCALPUPPET_STATE_DIR', flag: '--state-dir', type: 'path', default: (env) => defaultStateDir(env), description: 'run records and logs'},
  puppet: {env: 'LOCALPUPPET_PUPPET', flag: '--puppet', type: 'command', default: () => 'puppet', description: 'the puppet executable'},
  puppet_args: {env: 'LOCALPUPPET_PUPPET_ARGS', flag: '-- ARGS', type: 'list', default: () => [], description: 'arguments for puppet apply (env: split on whitespace)'},
  source: {env: 'LOCALPUPPET_SOURCE', flag: '--source', type: 'url', default: () => null, description: 'the release repository fetch reads, or apt'},
  trust: {env: 'LOCALPUPPET_TRUST', flag: '--trust', type: 'paths', default: () => [], description: 'trusted public keys, files or directories (env: separated by :), besides /etc/localpuppet/trusted-keys'},
  input: {env: 'LOCALPUPPET_INPUT', flag: 'INPUT', type: 'path', default: () => DEFAULT_INPUT, description: 'the input apply, plan, status and validate read'},
  layers_dir: {env: 'LOCALPUPPET_LAYERS_DIR', flag: '--layers', type: 'path', default: () => null, description: "the layers an input names (site/dc1 is DIR/site/dc1.yaml); unset: layers/ beside the input file"},
  metrics_file: {env: 'LOCALPUPPET_METRICS_FILE', flag: '--metrics-file', type: 'path', default: () => null, description: 'a Prometheus textfile written after each run'},
  input_from: {
    env: 'LOCALPUPPET_INPUT_FROM',
    flag: null,
    type: 'choice',
    choices: ['file', 'repository'],
    default: () => 'file',
    description: "repository: apply --fetch takes this node's input (node_name's) from the source's signed index and keeps it as the input file",
  },
  node_name: {env: 'LOCALPUPPET_NODE_NAME', flag: null, type: 'name', default: () => defaultNodeName(), description: "this node's name in the repository's node inputs and in the metrics"},
  prometheus: {
    env: 'LOCALPUPPET_PROMETHEUS',
    flag: '--prometheus',
    type: 'url',
    default: () => null,
    description: 'the Prometheus that scrapes the nodes\' metrics (http://host:9090): what fleet status reads and promote --require-healthy asks',
  },
  repository_id: {
    env: 'LOCALPUPPET_REPOSITORY_ID',
    flag: '--repository-id',
    type: 'id',
    default: () => null,
    description: "the id of the repository the source serves (its index.json's repository field, checked on the publisher's side): an index with another id is refused, from the first fetch on",
  },
  puppetdb: {
    env: 'LOCALPUPPET_PUPPETDB',
    flag: '--puppetdb',
    type: 'url',
    default: () => null,
    description: "the PuppetDB each run's report, facts and catalog go to (https://host:8081), and what fleet status --puppetdb and promote --puppetdb read",
  },
  puppetdb_ca: {env: 'LOCALPUPPET_PUPPETDB_CA', flag: null, type: 'path', default: () => null, description: "the CA certificate PuppetDB's server certificate must be signed by"},
  puppetdb_cert: {env: 'LOCALPUPPET_PUPPETDB_CERT', flag: null, type: 'path', default: () => null, description: "this node's client certificate for PuppetDB"},
  puppetdb_key: {env: 'LOCALPUPPET_PUPPETDB_KEY', flag: null, type: 'path', default: () => null, description: "the private key of puppetdb_cert"},
} satisfies Record<string, SettingSpec>

/** The host name, lowercased (Puppet's certnames are): the default node name. */
export function defaultNodeName(): string {
  return hostname().toLowerCase()
}

export type SettingKey = keyof typeof SETTINGS
export const SETTING_KEYS = Object.keys(SETTINGS) as SettingKey[]

/** One effective setting and where its value came from. */
export interface Setting {
  key: SettingKey
  value: SettingValue
  origin: 'flag' | 'env' | 'file' | 'default'
  /** The flag, the variable, `file:line`, or `built-in`. */
  from: string
}

export interface ConfigFile {
  /** The file read, or null when the default file does not exist. */
  path: string | null
  values: Partial<Record<SettingKey, {value: SettingValue; line: number}>>
}

const cache = new Map<string, Promise<ConfigFile>>()

/** Where the configuration file is: LOCALPUPPET_CONFIG, else /etc/localpuppet/config.yaml. */
export function configPath(env: NodeJS.ProcessEnv = process.env): {path: string; explicit: boolean} {
  const named = env[CONFIG_ENV]
  return named ? {path: named, explicit: true} : {path: DEFAULT_CONFIG_FILE, explicit: false}
}

/**
 * Reads and checks the configuration file once per process. The default file may be
 * absent; a file named by LOCALPUPPET_CONFIG must exist (66). An unknown key or a value of
 * the wrong type is a 65 naming the key and its line.
 */
export function loadConfigFile(env: NodeJS.ProcessEnv = process.env): Promise<ConfigFile> {
  const {path, explicit} = configPath(env)
  let loaded = cache.get(path)
  if (!loaded) {
    loaded = readConfigFile(path, explicit)
    cache.set(path, loaded)
  }

  return loaded
}

async function readConfigFile(path: string, explicit: boolean): Promise<ConfigFile> {
  let text: string
  try {
    // It names what root runs and deletes: only a file root (or this user) alone can write counts.
    const bytes = await readBoundedFile(path, {maxBytes: 1024 * 1024, label: `configuration ${path}`, error: (message) => new InputError(message)})
    assertTrustedPath(path, {what: 'configuration', overridable: false})
    text = decodeUtf8Strict(bytes, path, (message) => new InputError(message))
  } catch (error) {
    if (error instanceof LocalpuppetError) throw error
    if (!explicit && (error as NodeJS.ErrnoException).code === 'ENOENT') return {path: null, values: {}}
    throw describeFsError(error, `configuration ${path}${explicit ? ` (${CONFIG_ENV})` : ''}`)
  }

  return {path, values: await parseConfig(text, path)}
}

/** Parses the text of a configuration file; exported for tests. */
export async function parseConfig(text: string, path: string): Promise<ConfigFile['values']> {
  const {LineCounter, parseDocument, isMap, isScalar} = await import('yaml')
  const lines = new LineCounter()
  const doc = parseDocument(text, {lineCounter: lines, uniqueKeys: true, prettyErrors: false})
  const lineOf = (offset: number | undefined) => (offset === undefined ? 1 : lines.linePos(offset).line)
  if (doc.errors.length > 0) {
    const error = doc.errors[0]
    throw new InputError(`${path}:${lineOf(error.pos[0])}: not valid YAML (${error.message.split('\n')[0]})`)
  }

  const values: ConfigFile['values'] = {}
  if (doc.contents === null || (isScalar(doc.contents) && doc.contents.value === null)) return values
  if (!isMap(doc.contents)) throw new InputError(`${path}:${lineOf(doc.contents.range?.[0])}: expected a mapping of settings (key: value)`)
  for (const pair of doc.contents.items) {
    const keyNode = pair.key as {value?: unknown; range?: [number, number, number]} | null
    const line = lineOf(keyNode?.range?.[0])
    const key = String(keyNode?.value)
    if (!Object.hasOwn(SETTINGS, key)) {
      const {closest} = await import('../util/did-you-mean.js')
      const near = closest(key, SETTING_KEYS)
      throw new InputError(`${path}:${line}: unknown setting ${JSON.stringify(key)}${near ? ` (did you mean ${near}?)` : ''}; known: ${SETTING_KEYS.join(', ')}`)
    }

    const raw = (pair.value as {toJSON?: () => unknown} | null)?.toJSON?.() ?? null
    // `key:` with nothing after it leaves the setting unset, as a commented-out line would.
    if (raw === null) continue
    values[key as SettingKey] = {value: checkValue(key as SettingKey, raw, `${path}:${line}: ${key}`), line}
  }

  return values
}

function checkValue(key: SettingKey, raw: unknown, where: string): SettingValue {
  const spec: SettingSpec = SETTINGS[key]
  // A control character in a path, command or argument is never meant: a newline would
  // forge a line in `config`, a record or a metrics file, an escape would rewrite a terminal.
  const clean = (text: unknown) => typeof text === 'string' && !CONTROL.test(text)
  const controlled = typeof raw === 'string' ? !clean(raw) : Array.isArray(raw) && raw.some((item) => typeof item === 'string' && !clean(item))
  const fail = (expected: string): never => {
    throw new InputError(`${where}: expected ${expected}${controlled ? ' without control characters' : ''}, got ${describe(raw)}`)
  }

  const absolute = (value: string) => {
    if (!isAbsolute(value)) fail('an absolute path')
    return value
  }

  if (controlled) {
    const expected = {path: 'an absolute path', command: 'a command name or an absolute path', url: 'a URL or an absolute directory', list: 'a list of strings', paths: 'a path or a list of paths', name: 'a node name', choice: `one of ${spec.choices?.join(', ')}`, id: REPOSITORY_ID_TEXT}
    fail(expected[spec.type])
  }

  switch (spec.type) {
    case 'path': {
      if (typeof raw !== 'string' || raw === '') return fail('a path')
      return absolute(raw)
    }

    case 'command': {
      if (typeof raw !== 'string' || raw === '') return fail('a command name or an absolute path')
      return raw.includes('/') ? absolute(raw) : raw
    }

    case 'url': {
      if (typeof raw !== 'string' || raw === '') return fail('a URL or an absolute directory')
      return raw === 'apt' || /^[a-z][a-z0-9+.-]*:/i.test(raw) ? raw : absolute(raw)
    }

    case 'name': {
      if (typeof raw !== 'string' || !/^[a-z0-9][a-z0-9._-]{0,252}$/.test(raw) || raw.includes('..')) return fail("a node name (lowercase letters, digits, '.', '-', '_')")
      return raw
    }

    case 'id': {
      if (typeof raw !== 'string' || !isRepositoryId(raw)) return fail(REPOSITORY_ID_TEXT)
      return raw
    }

    case 'choice': {
      if (typeof raw !== 'string' || !spec.choices!.includes(raw)) return fail(`one of ${spec.choices!.join(', ')}`)
      return raw
    }

    case 'list':
    case 'paths': {
      // One path is as good as a list of one for trust; arguments must be a list (no guessing at quoting).
      const list = spec.type === 'paths' && typeof raw === 'string' ? [raw] : raw
      if (!Array.isArray(list) || list.some((item) => typeof item !== 'string' || item === '')) return fail(spec.type === 'paths' ? 'a path or a list of paths' : 'a list of strings')
      return spec.type === 'paths' ? (list as string[]).map((item) => absolute(item)) : (list as string[])
    }
  }
}

/** What a repository id looks like, for messages. */
export const REPOSITORY_ID_TEXT = "a repository id (32 hex digits: the repository field of the repository's index.json)"

/** A repository id as publish makes them (repository-index.ts's REPOSITORY_ID; kept here so that reading the settings loads no index code). */
export function isRepositoryId(text: string): boolean {
  return /^[0-9a-f]{32}$/.test(text)
}

/** C0 controls and DEL. */
const CONTROL = /[\u0000-\u001F\u007F]/

function describe(value: unknown): string {
  if (Array.isArray(value)) return 'a list'
  if (value === null) return 'nothing'
  if (typeof value === 'object') return 'a mapping'
  return `${typeof value} ${JSON.stringify(value)}`
}

function fromEnv(key: SettingKey, text: string): SettingValue {
  const spec: SettingSpec = SETTINGS[key]
  if (spec.type === 'list') return text.split(/\s+/).filter((part) => part !== '')
  if (spec.type === 'paths') return text.split(':').filter((part) => part !== '')
  return text
}

/**
 * A setting's effective value: the flag's (when given), else the environment's, else the
 * file's, else the built-in default. An empty environment variable counts as unset.
 */
export async function resolveSetting(key: SettingKey, flag?: SettingValue, env: NodeJS.ProcessEnv = process.env): Promise<Setting> {
  const spec: SettingSpec = SETTINGS[key]
  // Read (and check) the file even when a flag or variable wins: a broken file is never silently ignored.
  const file = await loadConfigFile(env)
  if (flag !== undefined && flag !== null && !(Array.isArray(flag) && flag.length === 0)) return {key, value: flag, origin: 'flag', from: spec.flag ?? key}
  const text = env[spec.env]
  if (text !== undefined && text !== '') {
    const value = spec.type === 'name' || spec.type === 'choice' || spec.type === 'id' ? checkValue(key, text, spec.env) : fromEnv(key, text)
    return {key, value, origin: 'env', from: spec.env}
  }
  const entry = file.values[key]
  if (entry) return {key, value: entry.value, origin: 'file', from: `${file.path}:${entry.line}`}
  return {key, value: spec.default(env), origin: 'default', from: 'built-in'}
}

/** Every setting, in table order. */
export async function resolveSettings(flags: Partial<Record<SettingKey, SettingValue>> = {}, env: NodeJS.ProcessEnv = process.env): Promise<Setting[]> {
  return Promise.all(SETTING_KEYS.map((key) => resolveSetting(key, flags[key], env)))
}

/** The value of a string setting (null when unset). */
export async function settingString(key: SettingKey, flag?: string | null, env: NodeJS.ProcessEnv = process.env): Promise<string | null> {
  const {value} = await resolveSetting(key, flag ?? undefined, env)
  return Array.isArray(value) ? value.join(' ') : value
}

/** The value of a list setting. */
export async function settingList(key: SettingKey, flag?: string[], env: NodeJS.ProcessEnv = process.env): Promise<string[]> {
  const {value} = await resolveSetting(key, flag, env)
  return Array.isArray(value) ? value : value === null ? [] : [value]
}

/** Forgets files read so far (tests). */
export function clearConfigCache(): void {
  cache.clear()
}
