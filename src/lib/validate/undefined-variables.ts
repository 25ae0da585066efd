import type {ModuleFacts} from '../catalog/module-facts.js'
import type {DefinitionScope, FacterNames, FileScopes} from '../catalog/variable-scopes.js'

/**
 * What Puppet defines on every run besides facts and ENC parameters: at top scope
 * (Puppet::Parser::Compiler#set_node_parameters, Puppet::Node::Facts#add_local_facts,
 * Puppet.initialize_facts, server facts) and in every class and define.
 */
export const PUPPET_VARIABLES = [
  'facts', 'trusted', 'server_facts', 'settings', 'environment', 'clientcert', 'clientversion', 'clientnoop', 'puppetversion',
  'agent_specified_environment', 'serverversion', 'servername', 'serverip', 'title', 'name', 'module_name', 'caller_module_name',
]

export interface VariableContext {
  /** The manifests of one input's modulepath and main manifest: their classes and defines are judged, their top-scope assignments count. */
  files: string[]
  scopes: Map<string, FileScopes>
  /** Facter's own fact names, or null when unknown (then nothing is judged). */
  facter: FacterNames | null
  /** The facts each release of the modulepath adds. */
  moduleFacts: ModuleFacts[]
  /** Top-scope names the node gives: ENC parameters, the facts of --facts. */
  nodeNames: string[]
  /** The classes the node is given (its input's, and those the main manifest's top-scope code declares), each with whether it may not be declared (see DefinitionScope.uses): what they reach is judged. */
  roots: Array<[string, boolean]>
  /** Whether Puppet's autoloader loads this class or define from this file (a class in a file where it does not look is never evaluated). */
  loads: (definition: Pick<DefinitionScope, 'kind' | 'name'>, file: string) => boolean
  /** variableIndex of files, scopes and loads, when the caller keeps one for the inputs that share them; else made here. */
  index?: VariableIndex
}

/**
 * What the check needs of one modulepath's manifests, the same for every input on it:
 * made once and shared, so that each input then costs what its classes reach, not a walk
 * of the whole release.
 */
export interface VariableIndex {
  /** The definitions Puppet loads, by lower-case name. */
  definitions: Map<string, DefinitionScope[]>
  /** The names assigned at top scope or in a node body. */
  assigned: Set<string>
  /** Each loadable definition's file and place (files in order, then definitions in order). */
  placed: Map<DefinitionScope, {file: string; order: number}>
  /** Each class's names with those it inherits (see inheritedNames), as found. */
  inherited: Map<string, Set<string> | null>
  /** Each definition's parameters and local variables, as judged. */
  own: Map<DefinitionScope, Set<string>>
}

/** The VariableIndex of a modulepath's manifests. */
export function variableIndex(context: Pick<VariableContext, 'files' | 'scopes' | 'loads'>): VariableIndex {
  const index: VariableIndex = {definitions: new Map(), assigned: new Set(), placed: new Map(), inherited: new Map(), own: new Map()}
  for (const file of context.files) {
    const scopes = context.scopes.get(file)
    if (!scopes) continue
    for (const name of scopes.top) index.assigned.add(name)
    for (const definition of scopes.definitions) {
      if (!context.loads(definition, file)) continue
      index.placed.set(definition, {file, order: index.placed.size})
      const key = definition.name.toLowerCase()
      const same = index.definitions.get(key)
      if (same === undefined) index.definitions.set(key, [definition])
      else same.push(definition)
    }
  }

  return index
}

export interface UnknownVariable {
  file: string
  line: number
  column: number
  /** As written: `x`, or `::x` for a top-scope reference. */
  written: string
  definition: Pick<DefinitionScope, 'kind' | 'name'>
  /** Whether Puppet certainly evaluates the read for this node: unskippable code of a class the node certainly gets. */
  certain: boolean
  /** The structured fact a legacy fact stands for (`os.family`) when the name is one this Puppet does not collect, else null; '' for a legacy fact with no single structured one. */
  legacy: string | null
}

/**
 * Each variable a class or define of `files` reads that Puppet would not find, which is
 * an error under `strict_variables` (and under `strict: error`): a name read unqualified
 * that is not a parameter or local variable of the class (or of the classes it inherits),
 * and no top-scope name: what Puppet defines (PUPPET_VARIABLES), an ENC parameter, a fact
 * (Facter's core facts, its legacy ones only where this Puppet collects them, the release's
 * custom and external facts, --facts), or a variable assigned at top scope or in a node
 * body. A class whose parent is not found is judged on its `$::x` reads only. Judged are
 * the classes and defines `roots` reach, through what each declares by name and inherits
 * (see DefinitionScope.uses): what Puppet would evaluate for this node, so a release's
 * other modules do not fail an input that never uses them. `certain` tells a read Puppet
 * evaluates whatever the data (its class certainly declared, the read in no branch, loop
 * or default) from one in code Puppet may skip.
 * `skipped` says why nothing was judged: fact names that cannot be known.
 */
export function unknownVariables(context: VariableContext): {unknown: UnknownVariable[]; skipped: string | null} {
  const {facter} = context
  if (facter === null) return {unknown: [], skipped: "Facter's fact names could not be read from this Puppet"}
  const unknowable = context.moduleFacts.find((facts) => facts.unknowable !== null)
  if (unknowable) return {unknown: [], skipped: `${unknowable.unknowable} names its fact at run time, so any name may be a fact`}

  const index = context.index ?? variableIndex(context)
  const {definitions} = index
  const top = new Set([...PUPPET_VARIABLES, ...context.nodeNames, ...facter.core])
  const patterns: RegExp[] = []
  const legacy = new Map<string, string>()
  const legacyPatterns: RegExp[] = []
  for (const [name, structured] of Object.entries(facter.legacy)) {
    if (name.includes('*')) {
      ;(facter.include_legacy ? patterns : legacyPatterns).push(new RegExp(`^${name}$`))
      continue
    }

    if (facter.include_legacy) top.add(name)
    else legacy.set(name, structured ?? '')
  }

  for (const facts of context.moduleFacts) {
    for (const name of facts.names) top.add(name)
    for (const prefix of facts.prefixes) patterns.push(new RegExp(`^${prefix.replaceAll(/[.*+?^${}()|[\]\\]/g, '\\$&')}`))
  }

  const known = (name: string) => top.has(name) || index.assigned.has(name)
  const isTop = (name: string) => known(name) || known(name.toLowerCase()) || patterns.some((pattern) => pattern.test(name))
  const reached = reach(context.roots, definitions, false)
  const certain = reach(context.roots.filter(([, skippable]) => !skippable), definitions, true)
  const unknown: UnknownVariable[] = []
  // What the input's classes reach, in the order of the files and their definitions.
  const judged = [...reached].sort((a, b) => index.placed.get(a)!.order - index.placed.get(b)!.order)
  for (const definition of judged) {
    const {file} = index.placed.get(definition)!
    if (!index.own.has(definition)) index.own.set(definition, new Set([...definition.params, ...definition.locals]))
    const own = index.own.get(definition)!
    const parent = definition.parent === null ? new Set<string>() : inheritedNames(definition.parent, definitions, index.inherited, definition.name)
    for (const [name, atTop, line, column, skippable] of definition.refs) {
      if (!atTop && (parent === null || own.has(name) || parent.has(name))) continue
      if (isTop(name)) continue
      const legacyFact = legacy.get(name) ?? (legacyPatterns.some((pattern) => pattern.test(name)) ? '' : null)
      unknown.push({file, line, column, written: atTop ? `::${name}` : name, definition: {kind: definition.kind, name: definition.name}, certain: certain.has(definition) && !skippable, legacy: legacyFact})
    }
  }

  return {unknown, skipped: null}
}

/** The definitions `roots` reach through what each declares and the classes it inherits from; `certainly`: only through declarations Puppet cannot skip. */
function reach(roots: Array<[string, boolean]>, definitions: Map<string, DefinitionScope[]>, certainly: boolean): Set<DefinitionScope> {
  const reached = new Set<DefinitionScope>()
  const queue = roots.map(([name]) => name.replace(/^::/, '').toLowerCase())
  const queued = new Set(queue)
  // An index, not shift(): shift moves the whole queue each time.
  for (let next = 0; next < queue.length; next++) {
    for (const definition of definitions.get(queue[next]) ?? []) {
      reached.add(definition)
      const declared = definition.uses.filter(([, skippable]) => !certainly || !skippable).map(([name]) => name)
      for (const name of [...declared, ...(definition.parent === null ? [] : [definition.parent.replace(/^::/, '').toLowerCase()])]) {
        if (queued.has(name)) continue
        queued.add(name)
        queue.push(name)
      }
    }
  }

  return reached
}

/**
 * The parameters and local variables of class `parent` and every class it inherits from,
 * or null when one is not found; each class's set made once per call of unknownVariables
 * (`memo`), so that many classes inheriting one large class do not copy its names each.
 * An inheritance cycle (Puppet refuses one) stops at the first class met again, or at
 * `start`, the class asking; what is found through one depends on where it is entered,
 * and is not kept.
 */
function inheritedNames(parent: string, definitions: Map<string, DefinitionScope[]>, memo: Map<string, Set<string> | null>, start: string): Set<string> | null {
  const key = (name: string) => name.replace(/^::/, '').toLowerCase()
  const chain: DefinitionScope[][] = []
  const keys: string[] = []
  const passed = new Set([key(start)])
  let names: Set<string> | null = new Set()
  let cycle = false
  for (let at: string | null = key(parent); at !== null; ) {
    if (memo.has(at)) {
      names = memo.get(at) as Set<string> | null
      break
    }

    if (passed.has(at)) {
      cycle = true
      break
    }

    const found: DefinitionScope[] | undefined = definitions.get(at)?.filter((entry) => entry.kind === 'class')
    if (!found?.length) {
      names = null
      break
    }

    passed.add(at)
    chain.push(found)
    keys.push(at)
    at = found[0].parent === null ? null : key(found[0].parent)
  }

  // From the furthest ancestor down, each class's set its parent's and its own names.
  for (let i = chain.length - 1; i >= 0; i--) {
    if (names !== null) {
      names = new Set(names)
      for (const entry of chain[i]) for (const name of [...entry.params, ...entry.locals]) names.add(name)
    }

    if (!cycle) memo.set(keys[i], names)
  }

  return names
}
