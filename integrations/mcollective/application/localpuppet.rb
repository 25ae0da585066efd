require 'json'
require 'time'

module MCollective
  # `mco localpuppet`: a fleet rollout from one command, and what the fleet says about
  # itself, over the localpuppet agent (install this file in <libdir>/mcollective/application/
  # next to the agent and its DDL).
  #
  # apply starts runs node by node (canaries, then batches), tracks each node's own run id
  # from its apply reply, waits until every started run is final (one status request per
  # round for all the nodes still running, each node naming its own run), stops starting
  # batches at the first node that failed, was refused or did not answer, and prints one
  # line per node and a summary. Exit 0 only if every targeted node succeeded.
  class Application::Localpuppet < Application
    description 'Fleet rollouts with localpuppet: apply in batches and wait for every run; status summary, history and logs'

    usage 'mco localpuppet apply [REF] [--fetch] [--noop] [--save] [--batch N] [--batch-sleep S] [--canary N] [--timeout S] [--continue-on-failure] [--json] [FILTERS]'
    usage 'mco localpuppet status [--json] [FILTERS]'
    usage 'mco localpuppet history NODE [--limit N] [--json]'
    usage 'mco localpuppet log NODE [RUN_ID] [--bytes N] [--json]'
    usage ''
    usage "  apply's --timeout S is each run's own limit (localpuppet apply --timeout); -t stays mco's reply timeout."
    usage '  Exit codes: 0 every targeted node succeeded (status: answered, and its newest attempt did not fail);'
    usage '  1 a node failed, was refused, did not answer or was not started, or no node matched; 64 usage error.'

    # mco's own --batch/--batch-sleep would batch each request; ours batch the rollout.
    exclude_argument_sections 'rpc'

    option :batch,
           :arguments   => ['--batch N'],
           :description => 'Start runs on N nodes at a time; the next batch starts when every run of this one is final',
           :type        => Integer

    option :batch_sleep,
           :arguments   => ['--batch-sleep SECONDS'],
           :description => 'Wait this long between batches',
           :type        => Float

    option :canary,
           :arguments   => ['--canary N'],
           :description => 'First run on N nodes alone, then on the rest in batches',
           :type        => Integer

    option :continue_on_failure,
           :arguments   => ['--continue-on-failure'],
           :description => 'Keep starting batches after a node failed, was refused or did not answer',
           :type        => :bool

    option :fetch,
           :arguments   => ['--fetch'],
           :description => "Each node first fetches the release from its configured source",
           :type        => :bool

    option :noop,
           :arguments   => ['--noop'],
           :description => 'Run Puppet with --noop',
           :type        => :bool

    option :save,
           :arguments   => ['--save'],
           :description => "With REF: make it each node's release (the input's app)",
           :type        => :bool

    option :limit,
           :arguments   => ['--limit N'],
           :description => 'history: at most N runs',
           :type        => Integer

    option :bytes,
           :arguments   => ['--bytes N'],
           :description => 'log: at most the last N bytes (default 65536)',
           :type        => Integer

    option :json,
           :arguments   => ['--json'],
           :description => 'Print JSON instead of tables',
           :type        => :bool

    EXIT_OK = 0
    EXIT_NOT_ALL = 1
    EXIT_USAGE = 64
    # How long a node may take to start a run (fetching first can take a while).
    START_TIMEOUT = 30
    FETCH_START_TIMEOUT = 120
    # A status round: each node answers once its run is final or after WAIT seconds.
    WAIT = 10
    STATUS_TIMEOUT = 20
    OK_STATES = %w[succeeded skipped].freeze
    FINAL_STATES = %w[succeeded skipped failed error interrupted refused].freeze

    # mco's common options own --timeout (the reply timeout, also -t); apply's --timeout is
    # the runs' own limit, so it is taken out before mco parses the rest.
    def application_parse_options(help = false)
      index = ARGV.index { |arg| arg == '--timeout' || arg.start_with?('--timeout=') }
      if index
        value = ARGV[index].include?('=') ? ARGV.delete_at(index).split('=', 2)[1] : (ARGV.delete_at(index) && ARGV.delete_at(index))
        @run_timeout = Integer(value.to_s, exception: false)
        usage_error("--timeout needs a whole number of seconds > 0, not #{value.inspect}") unless @run_timeout&.positive?
      end
      super
    end

    def post_option_parser(configuration)
      configuration[:command] = ARGV.shift
      configuration[:arguments] = ARGV.dup
      ARGV.clear
    end

    def validate_configuration(configuration)
      commands = %w[apply status history log]
      usage_error("give a command: #{commands.join(', ')}") unless configuration[:command]
      usage_error("unknown command #{configuration[:command]}: expected #{commands.join(', ')}") unless commands.include?(configuration[:command])
      %i[batch canary limit bytes].each do |name|
        value = configuration[name]
        usage_error("--#{name} needs a whole number > 0, not #{value}") if value && value < 1
      end
      usage_error('--batch-sleep cannot be negative') if configuration[:batch_sleep]&.negative?
      usage_error('--save needs a REF: the release to save') if configuration[:save] && configuration[:command] == 'apply' && configuration[:arguments].empty?
      arity = {'apply' => 0..1, 'status' => 0..0, 'history' => 1..1, 'log' => 1..2}[configuration[:command]]
      return if arity.cover?(configuration[:arguments].size)

      usage_error("#{configuration[:command]} takes #{arity.max.zero? ? 'no arguments' : arity.minmax.uniq.join(' or ') + ' argument(s)'}, not #{configuration[:arguments].join(' ')}; see mco localpuppet --help")
    end

    def main
      @client = rpcclient('localpuppet')
      @client.progress = false
      send("#{configuration[:command]}_command", *configuration[:arguments])
    end

    private

    def usage_error(message)
      $stderr.puts("mco localpuppet: #{message}")
      exit(EXIT_USAGE)
    end

    def json?
      configuration[:json]
    end

    def discover_nodes
      nodes = @client.discover.map(&:to_s).sort
      if nodes.empty?
        json? ? puts(JSON.generate(nodes: [], ok: false, message: 'no nodes matched')) : $stderr.puts('mco localpuppet: no nodes matched the filters')
        exit(EXIT_NOT_ALL)
      end
      nodes
    end

    # One request to exactly these nodes (direct addressing): {node => RPC::Result} and the
    # nodes that did not answer within `timeout` seconds.
    def call(action, nodes, args, timeout)
      replies = {}
      @client.discover(:nodes => nodes)
      @client.timeout = timeout
      # method_missing is SimpleRPC's way of calling an action; calling it by name would hit
      # Object's own methods for some (display, fetch would not, but log and status might).
      @client.method_missing(action.to_sym, args) do |_response, result|
        replies[result[:sender]] = result
        yield result if block_given?
      end
      [replies, nodes - replies.keys]
    end

    # ---- apply ----

    def apply_command(ref = nil)
      nodes = discover_nodes
      @rows = nodes.to_h { |node| [node, {node: node, state: 'not started'}] }
      args = {}
      args[:app] = ref if ref
      args[:fetch] = true if configuration[:fetch]
      args[:noop] = true if configuration[:noop]
      args[:save] = true if configuration[:save]
      args[:timeout] = @run_timeout if @run_timeout
      groups = rollout_groups(nodes)
      stopped = nil
      started_at = Time.now
      groups.each_with_index do |group, index|
        @group_label = group_label(groups, index)
        sleep(configuration[:batch_sleep]) if index.positive? && configuration[:batch_sleep]
        start_group(group, args)
        wait_for(group)
        bad = group.reject { |node| OK_STATES.include?(@rows[node][:state]) }
        next if bad.empty? || configuration[:continue_on_failure]

        stopped = "stopped after #{@group_label}: #{bad.map { |node| "#{node} #{@rows[node][:state]}" }.join(', ')}" if index < groups.size - 1
        break
      end
      clear_progress
      report_apply(ref, stopped, Time.now - started_at)
    end

    # Canaries first, then batches of --batch (all at once without it).
    def rollout_groups(nodes)
      canary = configuration[:canary] ? nodes.first(configuration[:canary]) : []
      rest = nodes - canary
      groups = canary.empty? ? [] : [canary]
      groups + (rest.empty? ? [] : rest.each_slice(configuration[:batch] || rest.size).to_a)
    end

    def group_label(groups, index)
      return 'the canaries' if index.zero? && configuration[:canary]

      number = configuration[:canary] ? index : index + 1
      total = configuration[:canary] ? groups.size - 1 : groups.size
      total == 1 ? 'the one batch' : "batch #{number} of #{total}"
    end

    def start_group(group, args)
      group.each { |node| @rows[node][:state] = 'starting' }
      progress
      _, missing = call('apply', group, args, configuration[:fetch] ? FETCH_START_TIMEOUT : START_TIMEOUT) do |result|
        row = @rows[result[:sender]]
        data = result[:data]
        if result[:statuscode].zero?
          row.merge!(state: data[:state] || 'running', run_id: data[:run_id], release: data[:release])
        else
          row.merge!(state: 'refused', exit_code: data[:exit_code], release: data[:release], message: result[:statusmsg])
        end
        progress
      end
      missing.each { |node| @rows[node].merge!(state: 'no answer', message: 'did not answer the apply request (a run may or may not have started)') }
    end

    def wait_for(group)
      pending = group.select { |node| @rows[node][:state] == 'running' }
      until pending.empty?
        runs = pending.map { |node| "#{node}=#{@rows[node][:run_id]}" }.join(',')
        _, missing = call('status', pending, {runs: runs, wait: WAIT}, STATUS_TIMEOUT) do |result|
          record_status(@rows[result[:sender]], result)
          progress
        end
        missing.each do |node|
          @rows[node].merge!(state: 'no answer', message: "stopped answering while run #{@rows[node][:run_id]} was running")
        end
        pending = pending.select { |node| @rows[node][:state] == 'running' }
        progress
      end
    end

    def record_status(row, result)
      data = result[:data]
      unless data[:run_id] == row[:run_id]
        # The node could not report on the run it started (its record is gone, or status failed).
        row.merge!(state: 'error', message: "cannot read run #{row[:run_id]}: #{result[:statusmsg]}")
        return
      end

      row.merge!(
        state: data[:state], release: data[:release] || row[:release], changed: data[:changed], failed: data[:failed],
        out_of_sync: data[:out_of_sync], duration_ms: data[:duration_ms], exit_code: data[:exit_code],
        message: data[:error] || data[:reason] || (result[:statuscode].zero? ? nil : result[:statusmsg])
      )
    end

    def counts(states)
      states.each_with_object(Hash.new(0)) { |state, count| count[state] += 1 }
    end

    def progress
      return if json? || !$stderr.tty?

      count = counts(@rows.values.map { |row| row[:state] })
      done = OK_STATES.sum { |state| count[state] }
      failed = %w[failed error interrupted refused].sum { |state| count[state] }
      $stderr.print("\r\e[K#{@group_label}: #{done} done, #{count['running'] + count['starting']} running, #{failed} failed, #{count['no answer']} no answer, #{count['not started']} not started")
    end

    def clear_progress
      $stderr.print("\r\e[K") if !json? && $stderr.tty?
    end

    def report_apply(ref, stopped, elapsed)
      rows = @rows.values
      not_ok = rows.reject { |row| OK_STATES.include?(row[:state]) }
      count = counts(rows.map { |row| row[:state] })
      if json?
        puts JSON.pretty_generate(
          ref: ref, ok: not_ok.empty?, stopped: stopped, elapsed_seconds: elapsed.round(3), nodes: rows.map(&:compact),
          summary: {total: rows.size, by_state: count}, not_succeeded: not_ok.map { |row| row[:node] }
        )
      else
        table(%w[NODE STATE RELEASE CHANGED FAILED OUT_OF_SYNC DURATION MESSAGE], rows.map do |row|
          [row[:node], row[:state], row[:release], row[:changed], row[:failed], row[:out_of_sync], duration(row[:duration_ms]), message(row)]
        end)
        puts
        puts "#{rows.size} nodes: #{count.map { |state, n| "#{n} #{state}" }.join(', ')} (#{elapsed.round(1)} s)"
        puts stopped.capitalize if stopped
        puts "Not succeeded: #{not_ok.map { |row| "#{row[:node]} (#{row[:state]})" }.join(', ')}" unless not_ok.empty?
      end
      exit(not_ok.empty? ? EXIT_OK : EXIT_NOT_ALL)
    end

    def message(row)
      text = row[:message].to_s.lines.first.to_s.strip
      row[:exit_code] && !row[:exit_code].zero? && row[:state] == 'refused' ? "exit #{row[:exit_code]}: #{text}" : text
    end

    # ---- status ----

    def status_command
      nodes = discover_nodes
      rows = nodes.to_h { |node| [node, {node: node, state: 'no answer'}] }
      call('status', nodes, {}, STATUS_TIMEOUT) do |result|
        data = result[:data]
        row = rows[result[:sender]]
        row[:pointer] = data[:pointer]
        row[:disabled] = data[:puppet_disabled]
        if data[:run_id]
          row.merge!(state: data[:state], run_id: data[:run_id], release: data[:release], finished_at: data[:finished_at] || data[:started_at], exit_code: data[:exit_code])
          row[:message] = data[:error] || (result[:statuscode].zero? ? nil : result[:statusmsg]) unless OK_STATES.include?(data[:state])
          completed = data[:last_completed] || (FINAL_STATES.include?(data[:state]) && data[:state] != 'refused' ? data : nil)
          if completed
            row[:last_completed] = {run_id: completed[:run_id] || completed['run_id'], state: completed[:state] || completed['state'],
                                    release: completed[:release] || completed['release'], finished_at: completed[:finished_at] || completed['finished_at']}
          end
        else
          # No runs yet (66), or status itself failed.
          row.merge!(state: data[:exit_code] == 66 ? 'no runs' : 'unknown', exit_code: data[:exit_code], message: result[:statusmsg])
        end
      end
      report_status(rows.values)
    end

    def report_status(rows)
      silent = rows.select { |row| row[:state] == 'no answer' }
      answered = rows - silent
      by_state = counts(answered.map { |row| row[:state] })
      by_release = counts(answered.map { |row| row.dig(:last_completed, :release) || '(none completed)' })
      disabled = answered.count { |row| row[:disabled] }
      bad = rows.reject { |row| (OK_STATES + ['running']).include?(row[:state]) }
      if json?
        puts JSON.pretty_generate(nodes: rows.map(&:compact), by_state: by_state, by_release: by_release, disabled: disabled,
                                  no_answer: silent.map { |row| row[:node] }, ok: bad.empty?)
      else
        now = Time.now
        table(%w[NODE POINTS_AT NEWEST RELEASE AGE LAST_COMPLETED NOTE], rows.map do |row|
          last = row[:last_completed]
          note = [row[:disabled] && "disabled: #{row[:disabled]}", row[:message] && message(row)].compact.join('; ')
          [row[:node], row[:pointer], row[:state], row[:release], age(row[:finished_at], now),
           last && last[:run_id] != row[:run_id] ? "#{last[:state]} #{last[:release]} #{age(last[:finished_at], now)}" : nil, note]
        end)
        puts
        puts "By release (last completed run): #{by_release.sort.map { |release, n| "#{release} = #{n}" }.join(', ')}" unless answered.empty?
        puts "By state (newest attempt): #{by_state.sort.map { |state, n| "#{state} = #{n}" }.join(', ')}" unless answered.empty?
        puts "Puppet disabled: #{disabled}" if disabled.positive?
        puts "No answer: #{silent.map { |row| row[:node] }.join(', ')}" unless silent.empty?
      end
      exit(bad.empty? ? EXIT_OK : EXIT_NOT_ALL)
    end

    # ---- history, log ----

    def history_command(node)
      args = configuration[:limit] ? {limit: configuration[:limit]} : {}
      result = one_node('history', node, args)
      runs = Array(result[:data][:runs])
      if json?
        puts JSON.pretty_generate(runs)
      elsif runs.empty?
        puts "#{node}: no runs yet"
      else
        now = Time.now
        table(%w[RUN STATE RELEASE AGE DURATION CHANGED FAILED MESSAGE], runs.map do |run|
          run = run.transform_keys(&:to_sym)
          [run[:run_id], run[:state], run[:release], age(run[:finished_at] || run[:started_at], now), duration(run[:duration_ms]),
           run[:changed], run[:failed], (run[:error] || run[:reason]).to_s.lines.first.to_s.strip]
        end)
      end
      exit(EXIT_OK)
    end

    def log_command(node, run_id = nil)
      args = {}
      args[:run_id] = run_id if run_id
      args[:bytes] = configuration[:bytes] if configuration[:bytes]
      data = one_node('log', node, args)[:data]
      if json?
        puts JSON.pretty_generate(data)
      else
        $stderr.puts("(the last #{data[:text].bytesize} of #{data[:size]} bytes of #{data[:log]} on #{node})") if data[:truncated]
        $stdout.write(data[:text])
      end
      exit(EXIT_OK)
    end

    def one_node(action, node, args)
      replies, missing = call(action, [node], args, STATUS_TIMEOUT)
      unless missing.empty?
        $stderr.puts("mco localpuppet: #{node} did not answer")
        exit(EXIT_NOT_ALL)
      end
      result = replies[node]
      unless result[:statuscode].zero?
        $stderr.puts("mco localpuppet: #{node}: #{result[:statusmsg]}")
        exit(EXIT_NOT_ALL)
      end
      result
    end

    # ---- rendering ----

    def table(headers, rows)
      cells = rows.map { |row| row.map { |cell| cell.nil? ? '-' : cell.to_s } }
      widths = headers.each_index.map { |i| ([headers[i]] + cells.map { |row| row[i] }).map(&:length).max }
      [headers, *cells].each do |row|
        puts row.each_with_index.map { |cell, i| i == row.size - 1 ? cell : cell.ljust(widths[i]) }.join('  ').rstrip
      end
    end

    def duration(ms)
      ms.nil? ? nil : format('%.1fs', ms / 1000.0)
    end

    def age(iso, now)
      return nil unless iso

      seconds = (now - Time.parse(iso)).round
      return "#{seconds}s ago" if seconds < 120
      return "#{seconds / 60}m ago" if seconds < 7200
      return "#{seconds / 3600}h ago" if seconds < 172_800

      "#{seconds / 86_400}d ago"
    rescue ArgumentError
      nil
    end
  end
end
