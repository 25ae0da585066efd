import test from 'ava'

import {DEFAULT_LANGUAGE_MODE, effectiveLanguageMode, languageMode, languageModeArgs} from '../../../src/lib/release/language-mode.js'
import {parseManifestLanguage, parseReleaseManifest} from '../../../src/lib/release/release-manifest.js'

const label = 'app/tags/1.0.0/manifest.yaml'

test('manifest.yaml pins strict and strict_variables; what it leaves out is Puppet 8\'s default, passed explicitly', (t) => {
  t.deepEqual(DEFAULT_LANGUAGE_MODE, {strict: 'error', strictVariables: true})
  t.deepEqual(languageMode(parseManifestLanguage('modulepath: []\n', label), label), {strict: 'error', strictVariables: true, pinned: null})
  t.deepEqual(languageMode(parseManifestLanguage('strict_variables: false\n', label), label), {strict: 'error', strictVariables: false, pinned: label})
  t.deepEqual(languageMode(parseManifestLanguage('strict: warning\nstrict_variables: true\n', label), label), {strict: 'warning', strictVariables: true, pinned: label})
  t.deepEqual(languageModeArgs({strict: 'off', strictVariables: false}), ['--strict', 'off', '--no-strict_variables'])
  t.deepEqual(languageModeArgs({strict: 'error', strictVariables: true}), ['--strict', 'error', '--strict_variables'])
  t.deepEqual(parseReleaseManifest('strict: off\nmodulepath:\n  - dist/tags/1.0.0\n', label).map((entry) => entry.text), ['dist/tags/1.0.0'])
})

test('a wrong value names the file, line and key', (t) => {
  t.throws(() => parseManifestLanguage('modulepath: []\nstrict: errors\n', label), {message: `${label}:2: strict must be one of off, warning, error, got "errors"`})
  t.throws(() => parseManifestLanguage('strict_variables: "yes"\n', label), {message: `${label}:1: strict_variables must be true or false, got "yes"`})
  t.throws(() => parseReleaseManifest('strict_variable: true\n', label), {message: `${label}: unknown key "strict_variable" (did you mean strict_variables?); allowed: modulepath, strict, strict_variables`})
})

test('the arguments for puppet, which come after the mode on its command line, decide what Puppet compiles with', (t) => {
  const mode = {strict: 'error' as const, strictVariables: true, pinned: label}
  t.deepEqual(effectiveLanguageMode(mode, ['--confdir', '/x']), {...mode, overridden: false})
  t.like(effectiveLanguageMode(mode, ['--strict', 'warning', '--no-strict_variables']), {strict: 'warning', strictVariables: false, overridden: true})
  t.like(effectiveLanguageMode({...mode, strictVariables: false}, ['--strict=off', '--strict_variables']), {strict: 'off', strictVariables: true})
  t.like(effectiveLanguageMode(mode, ['--strict_variables=false']), {strictVariables: false})
})
