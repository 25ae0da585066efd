import type {ManifestLanguage} from './release-manifest.js'

/**
 * How a release's code compiles: Puppet's `strict` and `strict_variables` settings, always
 * passed to Puppet explicitly so that one tag compiles the same way on Puppet 7, 8 and
 * OpenVox 8 and 9, whatever each defaults to. `pinned` names the manifest.yaml that set
 * them, or is null when the release pins neither (DEFAULT_LANGUAGE_MODE).
 */
export interface LanguageMode {
  strict: 'off' | 'warning' | 'error'
  strictVariables: boolean
  /** The manifest.yaml that pins a setting (the app's), or null: the defaults. */
  pinned: string | null
}

/**
 * What a release that pins nothing gets: Puppet 8's own defaults (Puppet 7 defaulted to
 * `strict=warning`, `strict_variables=false`), so such a release compiles on Puppet 7
 * as it does on Puppet 8 and OpenVox.
 */
export const DEFAULT_LANGUAGE_MODE: Omit<LanguageMode, 'pinned'> = {strict: 'error', strictVariables: true}

/** The mode the app release's manifest.yaml pins, each setting it leaves out taken from DEFAULT_LANGUAGE_MODE. */
export function languageMode(language: ManifestLanguage, manifest: string): LanguageMode {
  const pinned = language.strict !== undefined || language.strictVariables !== undefined
  return {strict: language.strict ?? DEFAULT_LANGUAGE_MODE.strict, strictVariables: language.strictVariables ?? DEFAULT_LANGUAGE_MODE.strictVariables, pinned: pinned ? manifest : null}
}

/** Puppet's command-line arguments for a mode (the same on Puppet 7, 8 and OpenVox). */
export function languageModeArgs(mode: Pick<LanguageMode, 'strict' | 'strictVariables'>): string[] {
  return ['--strict', mode.strict, mode.strictVariables ? '--strict_variables' : '--no-strict_variables']
}

/**
 * The mode Puppet compiles in when `puppetArgs` (the arguments for puppet, which come
 * after languageModeArgs on its command line and so win) set `--strict` or
 * `--[no-]strict_variables` themselves; `overridden` says they did.
 */
export function effectiveLanguageMode(mode: LanguageMode, puppetArgs: string[]): LanguageMode & {overridden: boolean} {
  let {strict, strictVariables} = mode
  let overridden = false
  for (const [index, arg] of puppetArgs.entries()) {
    const strictValue = /^--strict(?:=(.*))?$/.exec(arg)
    if (strictValue) {
      const value = strictValue[1] ?? puppetArgs[index + 1]
      if (value === 'off' || value === 'warning' || value === 'error') [strict, overridden] = [value, true]
      continue
    }

    const variables = /^--(no-)?strict_variables(?:=(true|false))?$/.exec(arg)
    if (variables) [strictVariables, overridden] = [variables[1] === undefined && variables[2] !== 'false', true]
  }

  return {...mode, strict, strictVariables, overridden}
}
