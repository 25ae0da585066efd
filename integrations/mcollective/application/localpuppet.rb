require 'json'
require 'time'

module MCollective
  # `mco localpuppet`: fleet rollouts and fleet status with localpuppet, plus a node's
  # history and logs (install this file in <libdir>/mcollective/application/ next to the
  # agent and its DDL).
  #
  # apply and status are a thin front: they run `localpuppet rollout --via mco` and
  # `localpuppet fleet status --via mco` with the same command line, so the rollout engine
  # (canaries, batches or a window, the failure budget, deadlines, soak, revert, resume) is
  # one engine, written and tested in TypeScript, whichever door an operator uses. history
  # and log ask one node directly.
  class Application::Localpuppet < Application
    description 'Fleet rollouts with localpuppet (canaries, batches, failure budget, deadlines, revert, resume); fleet status, history and logs'

    usage 'mco localpuppet apply [REF] [FILTERS] [--canary N] [--batch 1,5,25%,100% | --window N] [--max-failures N|N%] [--soak D] [--deadline D] [--revert failed|all|none] [--only-outdated] [--fetch] [--noop] [--save] [--timeout S] [--json]'
    usage 'mco localpuppet apply --resume ID'
    usage 'mco localpuppet status [FILTERS] [--json]'
    usage 'mco localpuppet history NODE [--limit N] [--json]'
    usage 'mco localpuppet log NODE [RUN_ID] [--bytes N] [--json]'
    usage ''
    usage '  apply and status run `localpuppet rollout` and `localpuppet fleet status` (see their --help) with this'
    usage '  command line: FILTERS are mco\'s own (-W, -F, -C, -I, -A, -S, --nodes FILE, --dt, -T), -c/--config is'
    usage '  mco\'s client configuration, -t the time a node has to answer a start; --timeout S is each run\'s own limit.'
    usage '  The older --batch-sleep S is --soak S, --continue-on-failure is --max-failures 100%.'
    usage '  The localpuppet command: LOCALPUPPET_BIN, else plugin.localpuppet.executable, else /usr/local/bin/localpuppet.'
    usage '  Exit codes: 0 every targeted node succeeded (status: every node answered and applied its wanted release);'
    usage '  1 otherwise, or no node matched; 64 usage error; 69 mco or the broker cannot be used; 130 interrupted.'

    exclude_argument_sections 'rpc'

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
    STATUS_TIMEOUT = 20
    DEFAULT_EXECUTABLE = '/usr/local/bin/localpuppet'.freeze
    # The commands localpuppet itself runs, and what it calls them.
    FRONTS = {'apply' => %w[rollout], 'status' => %w[fleet status]}.freeze

    # apply and status hand their command line over whole: mco does not parse it (its own
    # parser would refuse the rollout's flags and eat --timeout).
    def application_parse_options(help = false)
      if !help && FRONTS.key?(ARGV.first) && (ARGV & %w[-h --help]).empty?
        @front = ARGV.dup
        ARGV.clear
        return @options = {:verbose => false}
      end

      super
    end

    def post_option_parser(configuration)
      configuration[:command] = ARGV.shift
      configuration[:arguments] = ARGV.dup
      ARGV.clear
    end

    def validate_configuration(configuration)
      return if @front

      commands = %w[apply status history log]
      usage_error("give a command: #{commands.join(', ')}") unless configuration[:command]
      usage_error("unknown command #{configuration[:command]}: expected #{commands.join(', ')}") unless commands.include?(configuration[:command])
      %i[limit bytes].each do |name|
        value = configuration[name]
        usage_error("--#{name} needs a whole number > 0, not #{value}") if value && value < 1
      end
      arity = {'history' => 1..1, 'log' => 1..2}[configuration[:command]]
      return if arity.cover?(configuration[:arguments].size)

      usage_error("#{configuration[:command]} takes #{arity.minmax.uniq.join(' or ')} argument(s), not #{configuration[:arguments].join(' ')}; see mco localpuppet --help")
    end

    def main
      run_front if @front
      @client = rpcclient('localpuppet')
      @client.progress = false
      send("#{configuration[:command]}_command", *configuration[:arguments])
    end

    private

    # `localpuppet rollout ...` or `localpuppet fleet status ...`, replacing this process: its
    # output and exit code are the command's.
    def run_front
      command, *rest = @front
      exec(localpuppet, *FRONTS[command], *translate(rest))
    rescue SystemCallError => e
      $stderr.puts("mco localpuppet: cannot run #{localpuppet}: #{e.message} (set LOCALPUPPET_BIN or plugin.localpuppet.executable)")
      exit(69)
    end

    # The older spellings, and mco's -c/--config, as localpuppet takes them.
    def translate(args)
      out = []
      index = 0
      while index < args.size
        arg = args[index]
        case arg
        when '-c', '--config'
          out += ['--mco-config', args[index + 1].to_s]
          index += 1
        when /\A--config=(.*)\z/m
          out << "--mco-config=#{Regexp.last_match(1)}"
        when '--batch-sleep'
          out += ['--soak', "#{args[index + 1].to_f.ceil}s"]
          index += 1
        when /\A--batch-sleep=(.*)\z/m
          out << "--soak=#{Regexp.last_match(1).to_f.ceil}s"
        when '--continue-on-failure'
          out += ['--max-failures', '100%']
        else
          out << arg
        end
        index += 1
      end
      out
    end

    def localpuppet
      from_env = ENV['LOCALPUPPET_BIN'].to_s.strip
      return from_env unless from_env.empty?

      configured = Config.instance.pluginconf['localpuppet.executable'].to_s.strip
      configured.empty? ? DEFAULT_EXECUTABLE : configured
    end

    def usage_error(message)
      $stderr.puts("mco localpuppet: #{message}")
      exit(EXIT_USAGE)
    end

    def json?
      configuration[:json]
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
