require 'yaml'

module MCollective
  module Facts
    # The stock YAML facts source, mended for Ruby 3.1 (Psych 4): mcollective 2.12.5's
    # Yaml_facts calls YAML.safe_load with positional arguments Psych 4 no longer takes, logs
    # an error and reports no facts, so `-W fact=value` silently matches no node.
    #
    #   factsource = yamlfile
    #   plugin.yaml = /etc/mcollective/facts.yaml[:/more/facts.yaml]   (later files win)
    #
    # A subclass of Base, not of Yaml_facts: Base registers every subclass as the one facts
    # plugin, and two would collide.
    class Yamlfile_facts < Base
      def initialize
        @mtimes = {}
        super
      end

      def load_facts_from_source
        fact_files.each_with_object({}) do |file, facts|
          loaded = YAML.safe_load(File.read(file), permitted_classes: [Symbol], aliases: true)
          facts.merge!(loaded) if loaded.is_a?(Hash)
        rescue StandardError => e
          Log.error("Failed to load yaml facts from #{file}: #{e.class}: #{e}")
        end
      end

      # Reload as soon as a file changes, not only when fact_cache_time passes.
      def force_reload?
        fact_files.any? do |file|
          mtime = File.stat(file).mtime
          changed = @mtimes.key?(file) && mtime > @mtimes[file]
          @mtimes[file] = mtime
          changed
        rescue SystemCallError
          false
        end
      end

      private

      def fact_files
        Config.instance.pluginconf.fetch('yaml', '/etc/mcollective/facts.yaml').split(File::PATH_SEPARATOR)
      end
    end
  end
end
