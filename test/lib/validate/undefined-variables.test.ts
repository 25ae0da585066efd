import test from 'ava'

import type {ModuleFacts} from '../../../src/lib/catalog/module-facts.js'
import type {DefinitionScope, FacterNames, FileScopes} from '../../../src/lib/catalog/variable-scopes.js'
import {type VariableContext, unknownVariables, variableIndex} from '../../../src/lib/validate/undefined-variables.js'

const FACTER: FacterNames = {core: ['os', 'networking'], legacy: {osfamily: 'os.family', 'ipaddress_.*': null}, include_legacy: false}
const noFacts: ModuleFacts = {names: new Set(), prefixes: [], unknowable: null}

/** A class reading each of `reads` once, unconditionally, in /m/a.pp. */
const definition = (name: string, reads: string[], extra: Partial<DefinitionScope> = {}): DefinitionScope => ({
  kind: 'class',
  name,
  parent: null,
  line: 1,
  params: [],
  locals: [],
  refs: reads.map((read, index): [string, boolean, number, number, boolean] => [read.replace(/^::/, ''), read.startsWith('::'), index + 2, 3, false]),
  uses: [],
  ...extra,
})

const context = (definitions: DefinitionScope[], extra: Partial<VariableContext> = {}): VariableContext => ({
  files: ['/m/a.pp'],
  scopes: new Map<string, FileScopes>([['/m/a.pp', {definitions, top: [], uses: []}]]),
  facter: FACTER,
  moduleFacts: [noFacts],
  nodeNames: [],
  roots: [['a', false]],
  loads: () => true,
  ...extra,
})

const written = (found: ReturnType<typeof unknownVariables>) => found.unknown.map((u) => `${u.definition.name} ${u.written}${u.certain ? '' : ' (maybe)'}${u.legacy === null ? '' : ` legacy:${u.legacy}`}`)

test('what Puppet defines, the node gives, the release adds and the class inherits is known; the rest is reported', (t) => {
  const reads = ['facts', 'trusted', 'title', 'module_name', 'os', '::networking', 'role', 'acme_version', 'driver_e1000', 'from_parent', 'top_level', 'nowhere', '::nowhere_top']
  const found = unknownVariables(
    context([definition('a', reads, {parent: '::a::params'}), definition('a::params', [], {locals: ['from_parent']})], {
      nodeNames: ['role'],
      moduleFacts: [{names: new Set(['acme_version']), prefixes: ['driver_'], unknowable: null}],
      scopes: new Map([['/m/a.pp', {definitions: [definition('a', reads, {parent: '::a::params'}), definition('a::params', [], {locals: ['from_parent']})], top: ['top_level'], uses: []}]]),
    }),
  )
  t.deepEqual(written(found), ['a nowhere', 'a ::nowhere_top'])
})

test('legacy facts count only where this Puppet collects them, and say which structured fact to read instead', (t) => {
  const classes = [definition('a', ['osfamily', '::ipaddress_eth0'])]
  t.deepEqual(written(unknownVariables(context(classes))), ['a osfamily legacy:os.family', 'a ::ipaddress_eth0 legacy:'])
  t.deepEqual(written(unknownVariables(context(classes, {facter: {...FACTER, include_legacy: true}}))), [])
})

test('only what the roots reach is judged, and only what Puppet certainly evaluates is certain', (t) => {
  const classes = [
    definition('a', ['x'], {uses: [['b', false], ['c', true]]}),
    definition('b', ['y']),
    definition('c', ['z']),
    definition('unused', ['w']),
    {...definition('d', []), refs: [['v', false, 9, 1, true]] as Array<[string, boolean, number, number, boolean]>},
  ]
  t.deepEqual(written(unknownVariables(context(classes))), ['a x', 'b y', 'c z (maybe)'])
  t.deepEqual(written(unknownVariables(context(classes, {roots: [['d', false]]}))), ['d v (maybe)'])
  // A class where the autoloader does not look for it is never evaluated.
  t.deepEqual(written(unknownVariables(context(classes, {loads: (d) => d.name !== 'b'}))), ['a x', 'c z (maybe)'])
})

test('a parent that is not found hides nothing: the class is judged on its $::x reads only', (t) => {
  t.deepEqual(written(unknownVariables(context([definition('a', ['maybe_inherited', '::not_top'], {parent: 'elsewhere'})]))), ['a ::not_top'])
})

test('fact names that cannot be known, or no Facter, judge nothing and say why', (t) => {
  const classes = [definition('a', ['anything'])]
  t.deepEqual(unknownVariables(context(classes, {moduleFacts: [{...noFacts, unknowable: 'm/lib/facter/dynamic.rb'}]})), {unknown: [], skipped: 'm/lib/facter/dynamic.rb names its fact at run time, so any name may be a fact'})
  t.deepEqual(unknownVariables(context(classes, {facter: null})).skipped, "Facter's fact names could not be read from this Puppet")
})

// Issue 33: each input walked every definition of its release, and each class copied the
// names of every class it inherits from. The index made once for a modulepath, shared by its
// inputs, and the inherited names kept per class, must judge as before.
test('one index shared by inputs, and classes sharing parents, chains and cycles of inheritance, judge as each on its own', (t) => {
  const classes = [
    definition('a', ['p', 'q', 'r', 'nowhere'], {parent: 'a::mid', uses: [['b', false], ['c', false], ['loop', false]]}),
    definition('a::mid', ['q'], {parent: '::a::params', locals: ['q']}),
    definition('a::params', [], {params: ['p'], locals: ['r']}),
    definition('b', ['p', 'q', 'x'], {parent: 'a::params'}),
    definition('c', ['r', 'lost'], {parent: 'missing'}),
    definition('loop', ['l1', 'l2', 'nope'], {parent: 'loop::b', locals: ['l1']}),
    definition('loop::b', ['l2'], {parent: 'loop', locals: ['l2']}),
  ]
  const expected = ['a nowhere', 'b q', 'b x', 'loop nope']
  t.deepEqual(written(unknownVariables(context(classes))), expected)
  const shared = context(classes)
  const index = variableIndex(shared)
  t.deepEqual(written(unknownVariables({...shared, roots: [['b', false]], index})), ['b q', 'b x'])
  t.deepEqual(written(unknownVariables({...shared, index})), expected)
  t.deepEqual(written(unknownVariables({...shared, roots: [['loop::b', false]], index})), ['loop nope'])
})
