import {type SyntaxProblem, SYNTAX_CHECK, syntaxProblems} from '../catalog/parser-validate.js'
import {PUPPET_LIBRARY, PUPPET_PRELUDE, runPuppetRuby} from '../catalog/puppet-ruby.js'
import {type FacterNames, type FileScopes, VARIABLE_SCOPES} from '../catalog/variable-scopes.js'

/** One catalog to compile: what `apply` would hand Puppet for one input. */
export interface CompileJob {
  id: string
  /** The exact ENC document bytes the exec ENC would print. */
  enc: string
  modulepath: string[]
  environment: string
  /** The main manifest, or null for an empty one. */
  manifest: string | null
  /** A fact set for the node, or null for this machine's facts (Facter, with the modules' custom facts). */
  facts: Record<string, unknown> | null
  /** Puppet settings for this catalog as on the command line (the release's language mode: `--strict error --strict_variables`). */
  settings: string[]
  /** The input's secrets (!secret, out of the ENC) by class and parameter: given to the class as Sensitive, as a run's Hiera layer does. */
  secrets?: Record<string, Record<string, string>>
}

export interface CompileResult {
  id: string
  ok: boolean
  /** Resources in the compiled catalog. */
  resources: number | null
  /** Puppet's error: its message without the location, and the file, line and column it names. */
  error: {message: string; file: string | null; line: number | null; column: number | null} | null
}

/**
 * After PUPPET_PRELUDE (and SYNTAX_CHECK): compiles every job, as `puppet apply`
 * does (Puppet::Application::Apply#main up to the catalog: the exec node terminus's own
 * translation of the ENC document into a node, its facts, the environment with the
 * modulepath and main manifest, then the compiler terminus and the conversion to a RAL
 * catalog, which validates resource parameters). Nothing is applied: no transaction, no
 * report, no state file; Puppet's settings are initialised but their directories are not
 * created (no `Puppet.settings.use`). One JSON line per job on stdout.
 */
const COMPILE = String.raw`
Puppet[:default_file_terminus] = :file_server
Puppet[:write_catalog_summary] = false
require 'puppet/indirector/node/exec'
exec = Puppet::Node::Exec.new
certname = Puppet[:node_name_value]
machine_facts = {}

describe = lambda do |e|
  message = e.respond_to?(:basic_message) && e.basic_message ? e.basic_message : e.message
  message = message.sub(/ on node \S+\z/, '')
  file = e.respond_to?(:file) ? e.file : nil
  line = e.respond_to?(:line) ? e.line : nil
  pos = e.respond_to?(:pos) ? e.pos : nil
  if file.nil? && (m = / \(file: ([^,)]+)(?:, line: (\d+))?(?:, column: (\d+))?\)\z/.match(message))
    message = message[0, m.begin(0)]
    file, line, pos = m[1], m[2] && m[2].to_i, m[3] && m[3].to_i
  end
  {'message' => message, 'file' => file, 'line' => line, 'column' => pos}
end

(request['jobs'] || []).each do |job|
  logs.clear
  result = {'id' => job['id'], 'ok' => false, 'resources' => nil, 'error' => nil}
  begin
    # The release's language mode, as apply passes it on Puppet's command line (before the
    # arguments for puppet, which win there, and so here).
    settings = job['settings'].dup
    until settings.empty?
      flag = settings.shift
      name = flag.sub(/\A--(no-)?/, '')
      value = flag.start_with?('--no-') ? false : (settings.first.nil? || settings.first.start_with?('--')) ? true : settings.shift
      Puppet[name.to_sym] = value unless request['puppet_args'].any? { |arg| arg =~ /\A--(no-)?#{name}(=|\z)/ }
    end
    env = Puppet::Node::Environment.create(job['environment'].to_sym, job['modulepath'], job['manifest'] || Puppet::Node::Environment::NO_MANIFEST)
    Puppet.override({:environments => Puppet::Environments::Static.new(env), :current_environment => env, :loaders => Puppet::Pops::Loaders.new(env, false, false)}, 'localpuppet validate --compile') do
      data = exec.send(:translate, certname, job['enc'])
      data[:environment] ||= env
      # A run delivers secrets through Hiera as Sensitive (see secrets/hiera-secrets.ts): the same type here.
      (job['secrets'] || {}).each do |cls, params|
        params.each { |param, value| ((data[:classes] ||= {})[cls] ||= {})[param] = Puppet::Pops::Types::PSensitiveType::Sensitive.new(value) }
      end
      facts = if job['facts']
        Puppet::Node::Facts.new(certname, job['facts'])
      else
        found = (machine_facts[job['modulepath']] ||= Puppet::Node::Facts.indirection.find(certname, :environment => env))
        Puppet::Node::Facts.new(certname, Marshal.load(Marshal.dump(found.values)))
      end
      node = exec.send(:create_node, certname, data, facts)
      node.add_server_facts({})
      catalog = Puppet::Resource::Catalog.indirection.find(node.name, :use_node => node)
      resources = catalog.resources.size
      catalog.to_ral.finalize
      result['ok'] = true
      result['resources'] = resources
    end
  rescue Exception => e
    raise if e.is_a?(SignalException) || e.is_a?(SystemExit)
    result['error'] = describe.call(e)
  end
  out.puts(JSON.generate(result))
end
`

/**
 * The longest validate's Puppet process may go without an answer: each manifest's check
 * and each catalog's compile answers once, so this bounds each of them (the first also
 * loads Puppet and Facter's fact names, a second or two). The largest manifest of Debian's
 * modules (apache's vhost.pp, 127 KB) is checked in well under a second, one at the bound
 * of MANIFEST_BYTES_BOUND in about ten; compiling a catalog of Debian's modules takes a
 * second or two, Facter included. Past it, the process is stopped and the file or input it
 * was on is a problem, never a hang (issue 33).
 */
export const PUPPET_STEP_TIMEOUT_MS = 120_000

/** What the one Puppet process of validate answers. */
export interface PuppetChecks {
  results: CompileResult[]
  syntax: SyntaxProblem[]
  /** The classes and defines of each file of `scopeFiles` that parsed (see VARIABLE_SCOPES). */
  scopes: Map<string, FileScopes>
  /** Facter's fact names, when `scopeFiles` asked for them and this Puppet has Facter 4. */
  facter: FacterNames | null
  /** The Puppet library the process loaded: its version, and the real path of its puppet/version.rb. */
  library: {version: string; file: string | null} | null
}

/**
 * In one Ruby process that loads Puppet once (Puppet takes seconds to start; compiling
 * is a fraction of that): checks the syntax of every file of `syntaxFiles`, each on its
 * own (see SYNTAX_CHECK), reading the classes and defines of those of `scopeFiles` as it
 * goes (see VARIABLE_SCOPES), then compiles every job's catalog. `puppet` is the puppet
 * executable: its interpreter (from its #! line) runs the program, so it is that Puppet's
 * library. `puppetArgs` are Puppet settings as on its command line (`--confdir`, ...).
 */
export async function compileCatalogs(puppet: string, jobs: CompileJob[], puppetArgs: string[] = [], syntaxFiles: string[] = [], scopeFiles: string[] = [], stepTimeoutMs = PUPPET_STEP_TIMEOUT_MS): Promise<PuppetChecks> {
  if (jobs.length === 0 && syntaxFiles.length === 0) return {results: [], syntax: [], scopes: new Map(), facter: null, library: null}
  const program = PUPPET_PRELUDE + PUPPET_LIBRARY + VARIABLE_SCOPES + SYNTAX_CHECK + COMPILE
  const run = await runPuppetRuby(puppet, program, {puppet_args: puppetArgs, syntax: syntaxFiles, scopes: scopeFiles, jobs}, {stepTimeoutMs})
  const {answers, ended} = run
  const results = new Map<string, CompileResult>()
  const scopes = new Map<string, FileScopes>()
  let facter: FacterNames | null = null
  let library: PuppetChecks['library'] = null
  for (const answer of answers) {
    if (typeof answer.id === 'string') results.set(answer.id, answer as unknown as CompileResult)
    if (typeof answer.syntax === 'string' && answer.scopes) scopes.set(answer.syntax, answer.scopes as FileScopes)
    if ('facter' in answer) facter = answer.facter as FacterNames | null
    if (answer.library) library = answer.library as PuppetChecks['library']
  }

  // Stopped for time during the compiles (every file answered): the first input without an answer is the one it was on.
  const checked = new Set(answers.map((answer) => answer.syntax))
  let stuck = run.timedOut && syntaxFiles.every((file) => checked.has(file))
  const unanswered = (job: CompileJob): CompileResult => {
    const message = stuck ? `Puppet did not finish compiling this input (${ended})` : `Puppet stopped before compiling this input (${ended})`
    stuck = false
    return {id: job.id, ok: false, resources: null, error: {message, file: null, line: null, column: null}}
  }

  return {
    results: jobs.map((job) => results.get(job.id) ?? unanswered(job)),
    syntax: syntaxProblems(syntaxFiles, answers, run),
    scopes,
    facter,
    library,
  }
}
