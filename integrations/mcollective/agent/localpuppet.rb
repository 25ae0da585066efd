require 'json'
require 'open3'

module MCollective
  module Agent
    # Starts detached localpuppet runs and reports on them. Every call runs the localpuppet
    # CLI with an argument vector (never a shell) and --json, and turns its exit code into a
    # SimpleRPC status: 0 is OK, anything else fails the reply with localpuppet's message,
    # keeping exit_code and error_code in the data so a client can tell 73 from 65.
    #
    # The node's own settings (input, module dir, state dir, puppet, its arguments, the
    # release source) come from localpuppet's node configuration, /etc/localpuppet/config.yaml,
    # exactly as for a localpuppet run by hand. The agent's own settings (server.cfg, or
    # plugin.d/localpuppet.cfg without the prefix):
    #   plugin.localpuppet.executable           = /usr/local/bin/localpuppet
    #   plugin.localpuppet.config               = /etc/localpuppet/config.yaml (LOCALPUPPET_CONFIG; localpuppet's default when unset)
    #   plugin.localpuppet.allow_request_source = false (may a fetch request name its own source?)
    class Localpuppet < RPC::Agent
      DEFAULT_EXECUTABLE = '/usr/local/bin/localpuppet'.freeze
      # The largest log tail a reply carries, whatever the request asks.
      LOG_MAX_BYTES = 1024 * 1024
      LOG_DEFAULT_BYTES = 64 * 1024
      # status wait=N: the agent's own timeout (the DDL's 120 s) must not cut the answer off.
      STATUS_MAX_WAIT = 50
      RUN_MAX_TIMEOUT = 7 * 24 * 3600

      action 'apply' do
        args = ['apply', *Array(request[:input]), '--detach', '--json']
        args += run_flags
        args += ['--app', request[:app]] if request[:app]
        args << '--fetch' if request[:fetch]
        args << '--if-changed' if request[:if_changed]
        start_run(args)
      end

      action 'rollback' do
        args = ['rollback', '--detach', '--json', *run_flags]
        # A fleet's revert names the release each node had before (never "the previous one").
        args += ['--to', request[:to]] if request[:to]
        start_run(args)
      end

      action 'fetch' do
        args = ['fetch', request[:ref], '--json']
        if request[:source]
          unless setting('allow_request_source') == 'true'
            refuse(64, 'usage', 'this node takes releases only from its configured source (plugin.localpuppet.allow_request_source is not true)')
          end
          args += ['--source', request[:source]]
        end
        args += ['--timeout', request[:timeout].to_s] if request[:timeout] && check_timeout(request[:timeout])
        result = localpuppet(args)
        next if result[:error]

        reply[:exit_code] = 0
        reply[:source] = result[:json]['source']
        reply[:releases] = result[:json]['releases']
        reply[:installed] = Array(result[:json]['releases']).count { |release| release['status'] == 'installed' }
      end

      action 'status' do
        run_id = request[:run_id]
        if request[:runs]
          # One request for a fleet whose nodes each started their own run: name=id pairs.
          named = request[:runs].split(',').map { |pair| pair.split('=', 2) }.to_h
          run_id = named[config.identity]
          refuse(64, 'usage', "no run named for #{config.identity} in runs") unless run_id
        end
        args = ['status', *Array(run_id), '--json']
        if request[:wait]
          wait = Integer(request[:wait])
          refuse(64, 'usage', "wait must be 1..#{STATUS_MAX_WAIT} seconds, not #{wait}") unless wait.between?(1, STATUS_MAX_WAIT)
          args += ['--wait', '--timeout', wait.to_s]
        end
        result = localpuppet(args, [0, 1, 75])
        next if result[:error]

        record = result[:json]
        summarize_record(record).each { |key, value| reply[key] = value }
        reply[:last_completed] = summarize_record(record['lastCompleted']).compact if record['lastCompleted'].is_a?(Hash)
        reply[:puppet_disabled] = record['puppetDisabled']['message'].to_s if record['puppetDisabled'].is_a?(Hash)
        reply[:pointer] = record['pointer']
        if record['applied'].is_a?(Hash)
          reply[:applied] = record['applied']['release']
          reply[:applied_run_id] = record['applied']['runId']
          reply[:applied_at] = record['applied']['finishedAt']
        end
        if record['drift'].is_a?(Hash)
          reply[:drift] = record['drift']['count']
          reply[:drift_noop] = record['drift']['noop']
        end
        # The question was answered, but the answer is a run that went wrong: say so in the
        # status, so `mco rpc` counts the node as failed and exits non-zero.
        reply.fail("run #{record['id']} #{record['state']}: #{record['error'] || failure_summary(record)}") if result[:exit_code] == 1
      end

      action 'history' do
        args = ['history', '--json']
        args += ['--limit', request[:limit].to_s] if request[:limit]
        result = localpuppet(args)
        next if result[:error]

        reply[:runs] = result[:json].map { |record| summarize_record(record).compact }
        reply[:count] = reply[:runs].size
      end

      action 'log' do
        bytes = Integer(request[:bytes] || LOG_DEFAULT_BYTES)
        refuse(64, 'usage', "bytes must be 1..#{LOG_MAX_BYTES}, not #{bytes}") unless bytes.between?(1, LOG_MAX_BYTES)
        result = localpuppet(['status', *Array(request[:run_id]), '--json'], [0, 1, 75])
        next if result[:error]

        record = result[:json]
        reply[:run_id] = record['id']
        reply[:state] = record['state']
        reply[:log] = record['log']
        begin
          File.open(record['log'], 'rb') do |file|
            size = file.size
            file.seek([size - bytes, 0].max)
            reply[:text] = file.read(bytes).to_s.force_encoding('UTF-8').scrub
            reply[:size] = size
            reply[:truncated] = size > bytes
          end
        rescue SystemCallError => e
          refuse(66, 'not-found', "log of run #{record['id']} (#{record['log']}): #{e.message}")
        end
      end

      action 'disable' do
        result = localpuppet(['disable', *Array(request[:message]), '--json'])
        next if result[:error]

        reply[:disabled] = true
        reply[:message] = result[:json]['message'] || request[:message]
      end

      action 'enable' do
        result = localpuppet(['enable', '--json'])
        next if result[:error]

        reply[:disabled] = false
        reply[:was_disabled] = result[:json]['wasDisabled']
        reply[:message] = result[:json]['message']
      end

      action 'releases' do
        args = ['releases', *Array(request[:app]), '--json']
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

      # The flags apply and rollback share.
      def run_flags
        flags = []
        flags << '--noop' if request[:noop]
        flags << '--save' if request[:save]
        flags += ['--timeout', request[:timeout].to_s] if request[:timeout] && check_timeout(request[:timeout])
        flags
      end

      def check_timeout(value)
        refuse(64, 'usage', "timeout must be 1..#{RUN_MAX_TIMEOUT} seconds, not #{value}") unless Integer(value).between?(1, RUN_MAX_TIMEOUT)
        true
      end

      # apply and rollback: a detached run's id, or why it could not start.
      def start_run(args)
        result = localpuppet(args)
        return if result[:error]

        record = result[:json]
        reply[:exit_code] = 0
        reply[:run_id] = record['id']
        reply[:state] = record['state']
        reply[:release] = record['release']
        reply[:started_at] = record['startedAt']
        reply[:input] = record.dig('input', 'source')
      end

      # Runs localpuppet and parses its JSON. An exit code outside `ok_codes` fails the reply
      # with localpuppet's own message and code; output that is not JSON is a bug report.
      def localpuppet(args, ok_codes = [0])
        executable = setting('executable') || DEFAULT_EXECUTABLE
        env = setting('config') ? {'LOCALPUPPET_CONFIG' => setting('config')} : {}
        Log.debug("localpuppet: running #{[executable, *args].inspect}")
        stdout, stderr, status = Open3.capture3(env, executable, *args, stdin_data: '')
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

      def refuse(exit_code, error_code, message)
        reply[:exit_code] = exit_code
        reply[:error_code] = error_code
        reply[:message] = message
        reply.fail!(message)
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
          first_error: record['firstError'],
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
