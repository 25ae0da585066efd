import {basename} from 'node:path'

import {PuppetUnavailableError} from '../errors.js'
import {startChild} from '../util/child.js'
import {findExecutable, scriptInterpreter} from '../util/find-executable.js'
import {assertTrustedPath} from '../util/trusted-path.js'

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
 * The program the Ruby that runs Puppet loads once to compile every job, as `puppet apply`
 * does (Puppet::Application::Apply#main up to the catalog: the exec node terminus's own
 * translation of the ENC document into a node, its facts, the environment with the
 * modulepath and main manifest, then the compiler terminus and the conversion to a RAL
 * catalog, which validates resource parameters). Nothing is applied: no transaction, no
 * report, no state file; Puppet's settings are initialised but their directories are not
 * created (no `Puppet.settings.use`). One JSON line per job on stdout.
 */
const PROGRAM = String.raw`
require 'json'
require 'puppet'
module Puppet; module Test; class LogCollector
  def initialize(logs); @logs = logs; end
  def <<(message); @logs << message; end
end; end; end unless defined?(Puppet::Test::LogCollector)

request = JSON.parse(STDIN.read)
out = STDOUT.dup
out.sync = true
$stdout = STDERR
Puppet.initialize_settings(request['puppet_args'])
Puppet[:default_file_terminus] = :file_server
Puppet[:write_catalog_summary] = false
logs = []
Puppet::Util::Log.close_all
Puppet::Util::Log.newdestination(Puppet::Test::LogCollector.new(logs))
Puppet::Util::Log.level = :warning
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

request['jobs'].each do |job|
  logs.clear
  result = {'id' => job['id'], 'ok' => false, 'resources' => nil, 'error' => nil}
  begin
    env = Puppet::Node::Environment.create(job['environment'].to_sym, job['modulepath'], job['manifest'] || Puppet::Node::Environment::NO_MANIFEST)
    Puppet.override({:environments => Puppet::Environments::Static.new(env), :current_environment => env, :loaders => Puppet::Pops::Loaders.new(env, false, false)}, 'localpuppet validate --compile') do
      data = exec.send(:translate, certname, job['enc'])
      data[:environment] ||= env
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
 * Compiles every job's catalog in one Ruby process that loads Puppet once (Puppet takes
 * seconds to start; compiling is a fraction of that). `puppet` is the puppet executable:
 * its interpreter (from its #! line) runs the program, so it is that Puppet's library.
 * `puppetArgs` are Puppet settings as on its command line (`--confdir`, ...).
 */
export async function compileCatalogs(puppet: string, jobs: CompileJob[], puppetArgs: string[] = []): Promise<CompileResult[]> {
  if (jobs.length === 0) return []
  const [interpreter, ...rubyArgs] = interpreterOf(puppet)
  // Started by the path judged, not looked up again. Run as root, the Ruby that loads
  // Puppet is code root runs as much as puppet itself (77).
  const ruby = findExecutable(interpreter)
  if (ruby === null) throw new PuppetUnavailableError(`could not find ${interpreter} (the interpreter of ${puppet}) on PATH`)
  if ((process.geteuid?.() ?? 0) === 0) assertTrustedPath(ruby, {what: `interpreter of ${puppet}`, content: true, overridable: false})
  let stdout = ''
  let stderr = ''
  const child = startChild(ruby, [...rubyArgs, '-e', PROGRAM], {
    input: JSON.stringify({puppet_args: puppetArgs, jobs}),
    onStdout: (chunk) => (stdout += chunk),
    onStderr: (chunk) => (stderr += chunk),
  })
  const exit = await child.exited
  if (exit.spawnError) throw new PuppetUnavailableError(`could not start ${ruby} (the interpreter of ${puppet}): ${exit.spawnError.message}`)
  const results = new Map<string, CompileResult>()
  for (const line of stdout.split('\n')) {
    if (!line.startsWith('{')) continue
    try {
      const result = JSON.parse(line) as CompileResult
      results.set(result.id, result)
    } catch {}
  }

  if (results.size === 0) {
    const why = stderr.split('\n').find((l) => /Error|error/.test(l)) ?? `exit ${exit.exitCode ?? exit.signal}`
    throw new PuppetUnavailableError(`could not load Puppet with ${ruby} (the interpreter of ${puppet}): ${why.trim()}`)
  }

  const stopped = `Puppet stopped before compiling this input (exit ${exit.exitCode ?? exit.signal})`
  return jobs.map((job) => results.get(job.id) ?? {id: job.id, ok: false, resources: null, error: {message: stopped, file: null, line: null, column: null}})
}

/** The command line that runs a Ruby script the way `puppet`'s own #! line runs it (else the ruby on PATH). */
function interpreterOf(puppet: string): string[] {
  const found = scriptInterpreter(puppet)
  return found?.path && /ruby/.test(basename(found.path)) ? [found.path, ...found.args] : ['ruby']
}
