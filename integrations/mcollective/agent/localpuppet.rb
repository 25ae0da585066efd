require 'json'
require 'open3'
require 'psych'
require 'shellwords'

module MCollective
  module Agent
    # Starts detached localpuppet runs and reports on them. Every call runs the localpuppet
    # CLI with an argument vector (never a shell) and --json, and turns its exit code into a
    # SimpleRPC status: 0 is OK, anything else fails the reply with localpuppet's message,
    # keeping exit_code and error_code in the data so a client can tell 73 from 65.
    #
    # Configuration (server.cfg, or plugin.d/localpuppet.cfg without the prefix):
    #   plugin.localpuppet.executable  = /usr/local/bin/localpuppet
    #   plugin.localpuppet.input       = /etc/puppet/input.yaml  (apply's input when the request names none)
    #   plugin.localpuppet.module_dir  = /etc/puppet/modules     (localpuppet's default when unset)
    #   plugin.localpuppet.state_dir   = /var/lib/localpuppet    (localpuppet's default when unset)
    #   plugin.localpuppet.puppet      = /usr/bin/puppet          (--puppet; PATH when unset)
    #   plugin.localpuppet.puppet_args = --vardir /srv/puppet/var (after --, split like a shell would, never run by one)
    class Localpuppet < RPC::Agent
      DEFAULT_EXECUTABLE = '/usr/local/bin/localpuppet'.freeze
      DEFAULT_INPUT = '/etc/puppet/input.yaml'.freeze

      action 'apply' do
        input = request[:input] || setting('input') || DEFAULT_INPUT
        reply[:input] = input
        args = ['apply', input, '--detach', '--json', *module_dir_args, *state_dir_args]
        args += ['--puppet', setting('puppet')] if setting('puppet')
        args << '--noop' if request[:noop]
        args << '--if-changed' if request[:if_changed]
        args += ['--', *puppet_args] unless puppet_args.empty?

        stdin = nil
        if request[:app]
          # localpuppet has no --app: the document goes on stdin with its app replaced.
          stdin = input_with_app(input, request[:app])
          args[1] = '-'
        end

        result = localpuppet(args, stdin)
        unless result[:error]
          record = result[:json]
          reply[:exit_code] = 0
          reply[:run_id] = record['id']
          reply[:state] = record['state']
          reply[:release] = record['release']
          reply[:started_at] = record['startedAt']
        end
      end

      action 'status' do
        args = ['status', *Array(request[:run_id]), '--json', *state_dir_args]
        result = localpuppet(args, nil, [0, 1, 75])
        next if result[:error]

        record = result[:json]
        summarize_record(record).each { |key, value| reply[key] = value }
        # The question was answered, but the answer is a run that went wrong: say so in the
        # status, so `mco rpc` counts the node as failed and exits non-zero.
        reply.fail("run #{record['id']} #{record['state']}: #{record['error'] || failure_summary(record)}") if result[:exit_code] == 1
      end

      action 'history' do
        args = ['history', '--json', *state_dir_args]
        args += ['--limit', request[:limit].to_s] if request[:limit]
        result = localpuppet(args)
        next if result[:error]

        reply[:runs] = result[:json].map { |record| summarize_record(record) }
        reply[:count] = reply[:runs].size
      end

      action 'releases' do
        args = ['releases', *Array(request[:app]), '--json', *module_dir_args]
        result = localpuppet(args)
        next if result[:error]

        reply[:releases] = result[:json]
        reply[:count] = result[:json].size
      end

      # Outputs without a value (the error fields of a good reply, the run fields of a
      # refused one) are left out rather than shown as nil.
      def after_processing_hook
        reply.data.delete_if { |_, value| value.nil? }
      end

      private

      def setting(name)
        value = config.pluginconf["localpuppet.#{name}"]
        value.nil? || value.strip.empty? ? nil : value.strip
      end

      def module_dir_args
        setting('module_dir') ? ['--module-dir', setting('module_dir')] : []
      end

      def state_dir_args
        setting('state_dir') ? ['--state-dir', setting('state_dir')] : []
      end

      def puppet_args
        Shellwords.split(setting('puppet_args') || '')
      end

      # Runs localpuppet and parses its JSON. An exit code outside `ok_codes` fails the reply
      # with localpuppet's own message and code; output that is not JSON is a bug report.
      def localpuppet(args, stdin = nil, ok_codes = [0])
        executable = setting('executable') || DEFAULT_EXECUTABLE
        Log.debug("localpuppet: running #{[executable, *args].inspect}")
        stdout, stderr, status = Open3.capture3(executable, *args, stdin_data: stdin || '')
        exit_code = status.exitstatus || 128 + status.termsig.to_i
        json = begin
          JSON.parse(stdout)
        rescue JSON::ParserError
          nil
        end

        if json.is_a?(Hash) && json['error'].is_a?(Hash)
          reply[:exit_code] = exit_code
          reply[:error_code] = json['error']['code']
          reply[:message] = json['error']['message']
          reply.fail(json['error']['message'].to_s)
          return {error: true, exit_code: exit_code}
        end

        if json.nil? || !ok_codes.include?(exit_code)
          detail = stderr.strip.lines.first.to_s.strip
          reply[:exit_code] = exit_code
          reply[:message] = "localpuppet #{args.first} exited #{exit_code} without a JSON answer: #{detail.empty? ? stdout.strip[0, 200] : detail}"
          reply.fail(reply[:message], 5)
          return {error: true, exit_code: exit_code}
        end

        {json: json, exit_code: exit_code}
      rescue SystemCallError => e
        reply[:message] = "cannot run localpuppet (#{executable}, plugin.localpuppet.executable): #{e.message}"
        reply.fail(reply[:message], 5)
        {error: true}
      end

      # The input document with `app` replaced (or added), edited as text in place: loading
      # it into Ruby and dumping it again would reread it as YAML 1.1 (`yes` becoming true,
      # dates becoming Dates) where localpuppet reads YAML 1.2.
      def input_with_app(path, app)
        text = File.read(path)
        document = Psych.parse(text) # false for an empty text
        root = document ? document.root : nil
        # Not a mapping: localpuppet refuses the document as it is, with its own message.
        return text unless root.is_a?(Psych::Nodes::Mapping)

        quoted = JSON.generate(app) # a JSON string is a YAML double-quoted scalar
        root.children.each_slice(2) do |key, value|
          next unless key.is_a?(Psych::Nodes::Scalar) && key.value == 'app'

          empty = value.start_line == value.end_line && value.start_column == value.end_column
          return splice(text, value, empty ? " #{quoted}" : quoted)
        end

        lines = text.lines
        if root.style == Psych::Nodes::Mapping::FLOW
          # Just after the opening brace.
          line = lines[root.start_line]
          lines[root.start_line] = line[0..root.start_column] + "app: #{quoted}#{root.children.empty? ? '' : ','} " + line[(root.start_column + 1)..]
        else
          lines.insert(root.start_line, "#{' ' * root.start_column}app: #{quoted}\n")
        end
        lines.join
      rescue Errno::ENOENT, Errno::ENOTDIR
        refuse(66, 'not-found', "input file #{path}: not found")
      rescue Errno::EACCES, Errno::EPERM
        refuse(66, 'not-found', "input file #{path}: permission denied")
      rescue SystemCallError, Psych::SyntaxError => e
        refuse(65, 'invalid-input', "input file #{path}: cannot set app: #{e.message}")
      end

      def refuse(exit_code, error_code, message)
        reply[:exit_code] = exit_code
        reply[:error_code] = error_code
        reply[:message] = message
        reply.fail!(message)
      end

      # Replaces the text a node spans (Psych's lines and columns count from 0). A block
      # scalar (app: >-) ends at the start of the line after it: keep that line break.
      def splice(text, node, replacement)
        replacement += "\n" if node.end_line > node.start_line && node.end_column.zero?
        lines = text.lines
        head = lines[node.start_line][0...node.start_column]
        tail = (lines[node.end_line] || '')[node.end_column..] || ''
        (lines[0...node.start_line] + [head + replacement + tail] + (lines[(node.end_line + 1)..] || [])).join
      end

      # The fields of a run record an operator reads, as flat snake_case outputs.
      def summarize_record(record)
        resources = record['resources'] || {}
        {
          run_id: record['id'],
          state: record['state'],
          release: record['release'],
          ref: record['ref'],
          noop: record['noop'],
          started_at: record['startedAt'],
          finished_at: record['finishedAt'],
          duration_ms: record['durationMs'],
          exit_code: record['exitCode'],
          puppet_exit_code: record['puppetExitCode'],
          changed: resources['changed'],
          failed: resources['failed'],
          out_of_sync: resources['outOfSync'],
          total: resources['total'],
          error: record['error'],
          reason: record['reason'],
          log: record['log'],
        }
      end

      def failure_summary(record)
        resources = record['resources']
        resources ? "#{resources['failed']} resources failed" : "exit code #{record['exitCode']}"
      end
    end
  end
end
