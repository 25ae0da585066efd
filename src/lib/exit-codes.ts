/**
 * The one table of exit codes. `--help` and the README render it; errors take their
 * codes from it so the two can never disagree.
 */
export const ExitCode = {
  ok: 0,
  failed: 1,
  usage: 64,
  invalid: 65,
  notFound: 66,
  unavailable: 69,
  internal: 70,
  locked: 73,
  ioError: 74,
  noPerm: 77,
  /** sysexits' EX_CONFIG: the node's key (node-key) is missing or unreadable. */
  noKey: 78,
  tempFail: 75,
  sigterm: 143,
} as const

export type ExitCodeValue = (typeof ExitCode)[keyof typeof ExitCode]

export interface ExitCodeRow {
  code: number | string
  meaning: string
}

/** How a 77 says what was not trusted. */
const UNTRUSTED = 'owned by another user or writable by others'

/** The exit-code row of a command that refuses (77) `what` when it is not trusted; `override`: --allow-untrusted can let it through. */
export function untrustedExit(what: string, override = true): ExitCodeRow {
  return {code: 77, meaning: `${what} is ${UNTRUSTED}${override ? ' (--allow-untrusted)' : ''}`}
}

export const APPLY_EXIT_CODES: ExitCodeRow[] = [
  {code: 0, meaning: 'success, with or without changes'},
  {code: 1, meaning: 'Puppet reported failures, or the catalog did not compile'},
  {code: '0/2/4/6/1', meaning: "with --detailed-exitcodes: 2 changes, 4 failures, 6 both"},
  {code: 64, meaning: 'usage error (unknown command or flag, bad flag value)'},
  {code: 65, meaning: "invalid input or release (YAML, schema, mutable, path); --fetch: bad signature or digest, a replayed (older), expired or substituted (another repository's) repository index, a node input that does not match the index; an encrypted input not for this node's key, or tampered"},
  {code: 66, meaning: 'input, module dir or release not found; no tag fits range; a channel the repository (without --fetch: this node) does not know; --fetch: a yanked tag not installed here; no input for this node in the repository (input_from: repository)'},
  {code: 69, meaning: "puppet is not available; --fetch: the release repository cannot be reached and the input's release is not installed"},
  {code: 70, meaning: 'internal error: a bug; please report it with the trace'},
  {code: 73, meaning: 'another run holds the lock (recorded as busy), or Puppet is disabled'},
  {code: 74, meaning: 'an I/O error: the state directory (or another file) could not be written, e.g. the disk is full; with --save, the input cannot be rewritten'},
  {code: 75, meaning: 'the run timed out (--timeout)'},
  {code: 77, meaning: `something it must trust is ${UNTRUSTED}: the configuration file, the input file (input_from: repository: its directory), the state dir, a replayed run's directory or record (--replay, rollback), the metrics file's directory, the module dir, a release or anything in it, the main manifest, the puppet executable or its interpreter, a trusted key, the node key (or it is readable by others); --fetch: what fetch's 77 names`},
  {code: 78, meaning: "the node's input is encrypted and the node's key (localpuppet node-key) is missing or cannot be read: nothing new applied"},
  {code: '130/143', meaning: 'interrupted by SIGINT/SIGTERM (SIGHUP 129); puppet stopped'},
]

export const STATUS_EXIT_CODES: ExitCodeRow[] = [
  {code: 0, meaning: 'the run succeeded, or was skipped (--if-changed)'},
  {code: 1, meaning: 'the run failed, errored, was interrupted, or the attempt was refused'},
  {code: '0-3', meaning: 'with --check: OK, WARNING, CRITICAL, UNKNOWN (Nagios plugin codes)'},
  {code: 64, meaning: 'usage error (e.g. RUN_ID is not a run id)'},
  {code: 65, meaning: 'the run record (run.json) is damaged; the message names it'},
  {code: 66, meaning: 'no such run, or no runs yet'},
  {code: 73, meaning: 'the run given found another run in progress (state busy)'},
  {code: 75, meaning: 'the run is still running (with --wait: when the wait timed out)'},
  {code: 77, meaning: `the state dir is ${UNTRUSTED}: its records are not believed (--allow-untrusted; with --check: UNKNOWN)`},
]

export const INSTALL_EXIT_CODES: ExitCodeRow[] = [
  {code: 0, meaning: 'installed, or already installed with the same content'},
  {code: 64, meaning: 'usage error'},
  {code: 65, meaning: 'the archive is corrupt, unsafe, unlisted content, or badly signed; a name too long for the file system; git refuses the repository'},
  {code: 66, meaning: 'archive, repository, tag or module dir not found'},
  {code: 73, meaning: 'a tag is installed with other content; or another install runs'},
  {code: 74, meaning: 'an I/O failure (disk full): nothing was installed, nothing left behind'},
  untrustedExit('the module dir, its .localpuppet or the <app>/tags (or <app>) it writes into, or an unsigned archive (or a directory on the way to it),'),
]

/** fetch (and what apply --fetch / plan --fetch meet before resolving). */
export const FETCH_EXIT_CODES: ExitCodeRow[] = [
  {code: 0, meaning: 'fetched, or already present'},
  {code: 64, meaning: 'usage error; no source configured; plain http with no trusted key and no --insecure; trunk or a branch'},
  {code: 65, meaning: 'bad signature or digest, hostile index or archive, a redirect from https to http; an index older than one already accepted from the repository (a replay), or expired; an index of another repository than the one accepted from the source (or without an id once one is), or not the one --accept-repository or repository_id names; the record of accepted versions is damaged'},
  {code: 66, meaning: 'the tag, range or channel is not in the repository, or names a yanked tag not installed here (a range skips yanked tags); a source without a scheme that reads as a host and is no directory here'},
  {code: 69, meaning: 'the repository cannot be reached (after retries: connection refused or reset, timed out, too slow, HTTP 5xx or 429, a redirect loop, plain HTTP on an https:// port), or lacks a file its index names'},
  {code: 73, meaning: 'a tag is installed with other content, or another install is running'},
  {code: 77, meaning: `the module dir, its .localpuppet (or the record of accepted index versions in it) or the <app>/tags (or <app>) it writes into, or an unsigned directory repository (or its index), is ${UNTRUSTED} (--allow-untrusted); a trusted key (or its directory) is (no override)`},
]

/** Renders a table of exit codes as aligned plain text, for --help and the README. */
export function renderExitCodes(rows: ExitCodeRow[], indent = ''): string {
  const width = Math.max(...rows.map((row) => String(row.code).length))
  return rows.map((row) => `${indent}${String(row.code).padEnd(width)}  ${row.meaning}`).join('\n')
}

export const ROLLOUT_EXIT_CODES: ExitCodeRow[] = [
  {code: 0, meaning: 'every targeted node ended on the release with success (or was up to date)'},
  {code: 1, meaning: "a node failed, was refused, busy, missed its deadline, did not answer or was not started, or was no longer on the release when the rollout ended (overtaken); or no node matched. Whether the rollout stopped (more failures than --max-failures allows) or every node had its turn: --json's stopped (null when it did not stop)"},
  {code: 64, meaning: 'usage error; REF is not a release reference (a typo of a command: rollout lst says did you mean localpuppet rollout list), nothing asked of any node'},
  {code: 65, meaning: "the rollout record is damaged, or its events do not lead to the state it records (--resume); or rollouts/active.json is damaged; the --inventory is invalid (naming the node or key); the source's index (to check REF) is invalid, not signed by a trusted key, older than one this machine accepted, or expired"},
  {code: 66, meaning: 'no such rollout (--resume, show), or the --nodes, --inventory or --ssh-config file is missing; REF is not in the signed index of the source (--source, or the source setting), nothing asked of any node'},
  {code: 69, meaning: 'mco or ssh cannot be run, or the broker cannot be reached (the rollout is recorded: --resume continues it); the source (to check REF) cannot be reached'},
  {code: 73, meaning: 'another live rollout drives some of these nodes (named), or another process is driving that rollout (--resume)'},
  {code: 77, meaning: `${untrustedExit('the rollouts directory or a record').meaning}; --via ssh: the --nodes, --inventory, --ssh-config or --known-hosts file or the ssh executable is (no override)`},
  {code: '130/143', meaning: 'interrupted by SIGINT/SIGTERM: runs already started go on; --resume ID continues'},
]
