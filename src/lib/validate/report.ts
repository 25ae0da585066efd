import type {LanguageMode} from '../release/language-mode.js'
import type {RecordedPuppet} from '../state/run-record.js'

/** The checks run on every input; each is one JUnit test case. `compile` only with --compile. */
export const CHECKS = ['input', 'release', 'classes', 'parameters', 'syntax', 'variables', 'metadata', 'requirements', 'compile'] as const
export type CheckName = (typeof CHECKS)[number]

export interface Problem {
  check: CheckName
  /** The file at fault (an input, a manifest.yaml, a .pp file), or null. */
  file: string | null
  line: number | null
  column: number | null
  /** The whole one-line message, file and line included. */
  message: string
}

export interface InputReport {
  file: string
  /** The release the input resolved to, or null. */
  release: string | null
  problems: Problem[]
  /** What is worth knowing but fails nothing: a Puppet newer than a module's requirements allow (see requirementFindings), metadata.json Puppet only warns about. */
  warnings: Problem[]
  /** Checks that did not run for this input, and why (`requirements`: which Puppet this is cannot be told). */
  skipped: Partial<Record<CheckName, string>>
  /** How the release compiles (see RunPlan.languageMode), or null when it did not resolve. */
  languageMode: LanguageMode | null
  /** With --compile: whether Puppet compiled its catalog, or why it was not tried (skipped). */
  compile?: {status: 'compiled' | 'failed' | 'skipped'; resources: number | null; reason: string | null}
}

export interface ValidateReport {
  /** The checks that ran, in order: each is one JUnit test case per input. */
  checks: CheckName[]
  inputs: InputReport[]
  problems: number
  /** Why Puppet could not be run for the syntax check and --compile (exit 69), or null: those checks did not run. */
  puppetUnavailable: string | null
  /** The Puppet the syntax check, --compile and the module requirements are judged with, or null (--puppet none); its version from the library its Ruby loaded when nothing else tells. */
  puppet: RecordedPuppet | null
}
