import test from 'ava'
import fc from 'fast-check'

import {type TypeExpr, isInstance, parseType} from '../../../src/lib/catalog/puppet-types.js'

const ALIASES: Record<string, string> = {'Stdlib::Port': 'Integer[0, 65535]', 'Mod::Mode': "Enum['a', 'b']", 'Mod::Loop': 'Mod::Loop'}
const aliases = (name: string): TypeExpr | null => (ALIASES[name] ? parseType(ALIASES[name]) : null)
const check = (type: string, value: unknown) => isInstance(parseType(type)!, value, aliases)

test('certain mismatches are false, matches true', (t) => {
  const cases: Array<[string, unknown, boolean]> = [
    ['Boolean', 'yes', false],
    ['Boolean', true, true],
    ['String', 1, false],
    ['String[1]', '', false],
    ['String[1, 3]', 'abcd', false],
    ['Integer', '80', false],
    ['Integer[1, 65535]', 0, false],
    ['Integer[1]', 70000, true],
    ['Integer[default, 10]', -5, true],
    ['Numeric', 1.5, true],
    ['Float', 'x', false],
    ['Array[String]', ['a', 1], false],
    ['Array[String, 1]', [], false],
    ['Array', 'a', false],
    ['Hash[String, Integer]', {a: 1}, true],
    ['Hash[String, Integer]', {a: 'x'}, false],
    ['Optional[Integer]', null, true],
    ['Optional[Integer]', 'x', false],
    ["Enum['present', 'absent']", 'latest', false],
    ["Enum['Present', true]", 'present', true],
    ['Pattern[/^\\d+$/]', '12a', false],
    ['Pattern[/\\A\\d+\\z/]', '12', true],
    ['Variant[String, Array[String]]', 'a', true],
    ['Variant[String, Array[String]]', 1, false],
    ['Stdlib::Port', 70000, false],
    ['Optional[Mod::Mode]', 'c', false],
    ["Struct[{a => String, Optional[b] => Integer}]", {a: 'x'}, true],
    ["Struct[{a => String, Optional[b] => Integer}]", {b: 1}, false],
    ["Struct[{a => String}]", {a: 'x', c: 1}, false],
    ['NotUndef', 'x', true],
    ['Scalar', [], false],
    ['Data', {a: [1]}, true],
    ['Integer', 9_007_199_254_740_993n, true],
    ['Integer[0, 65535]', 9_007_199_254_740_993n, false],
    ['Numeric', -9_007_199_254_740_993n, true],
    ['Scalar', 9_007_199_254_740_993n, true],
    ['String', 9_007_199_254_740_993n, false],
  ]
  for (const [type, value, expected] of cases) t.is(check(type, value), expected, `${type} ${typeof value === 'bigint' ? value : JSON.stringify(value)}`)
})

test('what cannot be known statically is null, never false', (t) => {
  for (const [type, value] of [
    ['Float', 1],
    ['Unknown::Alias', 'x'],
    ['Mod::Loop', 'x'],
    ['Sensitive[String]', 'x'],
    ['Tuple[String, Integer]', ['a', 1]],
    ['Pattern[/a++/]', 'a'],
    ['Pattern[/\\h+/]', 'zz'],
    ['Variant[Unknown::X, Integer]', 'x'],
    ["Resource['file']", 'x'],
  ] as Array<[string, unknown]>) {
    t.is(check(type, value), null, `${type} ${JSON.stringify(value)}`)
  }
})

test('parseType refuses what it does not understand instead of guessing', (t) => {
  t.is(parseType('Integer[$x]'), null)
  t.is(parseType('String]'), null)
  t.deepEqual(parseType('Optional[ Array[ String[1] ] ]'), {type: 'Optional', args: [{type: 'Array', args: [{type: 'String', args: [{literal: 1}]}]}]})
})

test('a value that a type holds never reads as certainly wrong (property)', (t) => {
  const scalar = fc.oneof(fc.string(), fc.integer(), fc.boolean())
  const value = fc.oneof(scalar, fc.array(scalar, {maxLength: 3}), fc.dictionary(fc.string({maxLength: 3}), scalar, {maxKeys: 3}))
  fc.assert(
    fc.property(value, (v) => {
      for (const type of ['Any', 'Data', 'Variant[Scalar, Collection]', 'Optional[Data]', 'NotUndef']) if (check(type, v) !== true) return false
      return true
    }),
  )
  t.pass()
})
