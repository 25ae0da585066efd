/**
 * What each class and defined type of a manifest can see of variables, as Puppet's own
 * parser reads it (Puppet::Pops), for validate to report a variable Puppet would not find
 * under `strict_variables` (see undefinedVariables). Defined in Ruby, run after
 * PUPPET_PRELUDE and before SYNTAX_CHECK, which hands it each file's parsed program.
 *
 * For each class or define: its parameters, every name assigned anywhere in its body
 * (in an `if`, a lambda, a destructuring `[$a, $b] =`: more than Puppet sees, never
 * less), and each variable it reads that is none of those nor a lambda parameter in
 * scope nor a match variable (`$1`), once per name with where it is first read;
 * qualified names (`$apache::params::x`) are not judged, `$::x` is (a top-scope name).
 * A nested class or define is judged on its own: Puppet gives it no view of the
 * enclosing body (tried on 7.23). `top` is every name assigned outside classes and
 * defines: top scope and node bodies, which every class sees. `uses` is what each
 * declares, so that validate judges only what an input's classes reach. Reads and
 * declarations in code Puppet may skip (a branch, a loop, a default) say so, so that
 * validate can tell what certainly fails from what fails only if that code runs.
 */
export const VARIABLE_SCOPES = String.raw`
module LocalpuppetVariableScopes
  M = Puppet::Pops::Model

  def self.scan(program)
    definitions = []
    top = []
    program.definitions.each do |d|
      case d
      when M::HostClassDefinition, M::ResourceTypeDefinition then definitions << definition(d)
      when M::NodeDefinition then assigned(d.body, top)
      end
    end
    assigned(program.body, top)
    top_uses = {}
    uses(program.body, top_uses, false)
    {'definitions' => definitions, 'top' => top.uniq, 'uses' => top_uses.to_a}
  end

  def self.definition(d)
    params = d.parameters.map(&:name)
    locals = []
    assigned(d.body, locals)
    # Looked up once per read: a Hash, not a list (20,000 assignments made a list quadratic).
    known = {}
    params.each { |n| known[n] = true }
    locals.each { |n| known[n] = true }
    refs = {}
    lambdas = Hash.new(0)
    # A default is evaluated only when nothing gives the parameter a value.
    d.parameters.each { |p| refs_in(p.value, known, lambdas, refs, true) }
    refs_in(d.body, known, lambdas, refs, false)
    used = {}
    d.parameters.each { |p| uses(p.value, used, true) }
    uses(d.body, used, false)
    {
      'kind' => d.is_a?(M::HostClassDefinition) ? 'class' : 'define', 'name' => d.name,
      'parent' => d.is_a?(M::HostClassDefinition) ? d.parent_class : nil, 'line' => d.locator.line_for_offset(d.offset),
      'params' => params, 'locals' => locals.uniq, 'refs' => placed(refs.values), 'uses' => used.to_a,
    }
  end

  # Each read's [name, top, locator, offset, skippable] as [name, top, line, column,
  # skippable], the reads of each file asked in order of offset, so that the locator counts
  # each line's characters once (see LocalpuppetColumns in PUPPET_PRELUDE). Locators are
  # told apart by identity: a locator's own hash is its whole text's.
  def self.placed(reads)
    at = {}.compare_by_identity
    reads.each { |r| (at[r[2]] ||= {})[r[3]] = nil }
    at.each do |locator, offsets|
      offsets.keys.sort.each { |o| offsets[o] = [locator.line_for_offset(o), locator.pos_on_line(o)] }
    end
    reads.map { |name, top, locator, o, skippable| [name, top, *at[locator][o], skippable] }
  end

  # The classes and defines a body declares by a name written out: include, contain and
  # require, class { 'x': }, x::y { 't': }, create_resources('x::y', ...) and
  # ensure_resource. A name computed at run time is not followed.
  def self.uses(o, found, skippable)
    return if o.nil? || o.is_a?(M::Definition)
    add = lambda do |names|
      names.each { |n| found[n] = found.key?(n) ? (found[n] && skippable) : skippable }
    end
    case o
    when M::CallNamedFunctionExpression
      function = o.functor_expr.is_a?(M::QualifiedName) ? o.functor_expr.value : nil
      args = o.arguments
      case function
      when 'include', 'contain', 'require' then args.each { |a| add.call(class_names(a)) }
      when 'create_resources', 'ensure_resource', 'ensure_resources'
        type = args[0] && class_names(args[0]).first
        if type == 'class'
          add.call(class_names(args[1])) if function == 'ensure_resource' && args[1]
        elsif type
          add.call([type])
        end
      end
    when M::ResourceExpression
      if o.form.to_s == 'regular' && o.type_name.is_a?(M::QualifiedName)
        type = o.type_name.value.sub(/\A::/, '').downcase
        if type == 'class' then o.bodies.each { |b| add.call(class_names(b.title)) }
        else add.call([type])
        end
      end
    end
    each_branch(o) { |c, branch| uses(c, found, skippable || branch) }
  end

  def self.class_names(e)
    case e
    when M::QualifiedName, M::LiteralString then [e.value.to_s.sub(/\A::/, '').downcase]
    when M::LiteralList then e.values.flat_map { |v| class_names(v) }
    when M::AccessExpression
      e.left_expr.is_a?(M::QualifiedReference) && e.left_expr.cased_value.to_s.downcase == 'class' ? e.keys.flat_map { |k| class_names(k) } : []
    else []
    end
  end

  # Each model object under o, nested classes, defines, functions and nodes left out.
  def self.each_child(o)
    o._pcore_contents { |c| yield c if c.is_a?(M::Positioned) && !c.is_a?(M::Definition) }
  end

  def self.assigned(o, names)
    return if o.nil?
    names.concat(targets(o.left_expr)) if o.is_a?(M::AssignmentExpression)
    each_child(o) { |c| assigned(c, names) }
  end

  def self.targets(e)
    case e
    when M::VariableExpression then e.expr.is_a?(M::QualifiedName) ? [e.expr.value] : []
    when M::LiteralList then e.values.flat_map { |v| targets(v) }
    else []
    end
  end

  # Each child of o, and whether Puppet may skip it when it evaluates o: the branches of
  # if, unless, case and selectors, the right side of and/or, lambda bodies (a loop may
  # not run) and lambda parameter defaults.
  def self.each_branch(o)
    case o
    when M::IfExpression, M::UnlessExpression then [[o.test, false], [o.then_expr, true], [o.else_expr, true]].each { |c, b| yield c, b }
    when M::CaseExpression then yield o.test, false; o.options.each { |c| yield c, true }
    when M::SelectorExpression then yield o.left_expr, false; o.selectors.each { |c| yield c, true }
    when M::AndExpression, M::OrExpression then yield o.left_expr, false; yield o.right_expr, true
    when M::LambdaExpression then o.parameters.each { |p| yield p, true }; yield o.body, true
    else each_child(o) { |c| yield c, false }
    end
  end

  # lambdas: how many enclosing lambdas have each parameter name.
  def self.refs_in(o, known, lambdas, refs, skippable)
    case o
    when nil, M::Definition then return
    when M::LambdaExpression
      names = o.parameters.map(&:name)
      names.each { |n| lambdas[n] += 1 }
      o.parameters.each { |p| refs_in(p.value, known, lambdas, refs, true) }
      refs_in(o.body, known, lambdas, refs, true)
      names.each { |n| lambdas.delete(n) if (lambdas[n] -= 1).zero? }
      return
    when M::VariableExpression
      name = o.expr.is_a?(M::QualifiedName) ? o.expr.value : nil
      return if name.nil? || name =~ /\A\d+\z/ || known.key?(name) || lambdas.key?(name)
      top = name.start_with?('::')
      bare = top ? name[2..-1] : name
      return if bare.include?('::')
      seen = refs[name]
      refs[name] = [bare, top, o.locator, o.offset, skippable] if seen.nil? || (seen[4] && !skippable)
      return
    end
    each_branch(o) { |c, branch| refs_in(c, known, lambdas, refs, skippable || branch) }
  end

  # Facter's own fact names, for every operating system it knows (a node need not be this
  # machine's): the top-level name of each core fact, and each legacy name with the
  # structured fact it stands for. Names with '*' are patterns (ipaddress_.*). Nil when
  # this is no Facter 4 (then every name might be a fact, and nothing is judged).
  def self.facter_names
    require 'facter'
    lib = $LOADED_FEATURES.find { |f| f.end_with?('/facter.rb') }
    return nil if lib.nil? || !defined?(::Facts)
    Dir.glob(File.join(File.dirname(lib), 'facter', 'facts', '**', '*.rb')).sort.each do |f|
      begin
        require f
      rescue ScriptError, StandardError
      end
    end
    core = []
    legacy = {}
    visit = lambda do |mod|
      mod.constants.each do |c|
        k = mod.const_get(c) rescue next
        next unless k.is_a?(Module) && k.name.to_s.start_with?('Facts::')
        if k.is_a?(Class)
          next unless k.const_defined?(:FACT_NAME, false)
          name = k::FACT_NAME.to_s
          if k.const_defined?(:TYPE, false) && k::TYPE == :legacy then legacy[name] ||= nil
          else core << name.split('.').first
          end
          [*(k.const_defined?(:ALIASES, false) ? k::ALIASES : [])].each { |a| legacy[a.to_s] ||= name }
        else
          visit.call(k)
        end
      end
    end
    visit.call(::Facts)
    return nil if core.empty?
    include_legacy = begin
      Puppet[:include_legacy_facts]
    rescue ArgumentError
      true
    end
    {'core' => core.uniq.sort, 'legacy' => legacy, 'include_legacy' => include_legacy ? true : false}
  rescue ScriptError, StandardError
    nil
  end
end unless defined?(LocalpuppetVariableScopes)

variable_scope_files = (request['scopes'] || []).to_h { |f| [f, true] }
out.puts(JSON.generate({'facter' => LocalpuppetVariableScopes.facter_names})) unless variable_scope_files.empty?
`

/** What one class or defined type reads that it does not define itself (see VARIABLE_SCOPES). */
export interface DefinitionScope {
  kind: 'class' | 'define'
  name: string
  /** The class it inherits from, as written, or null. */
  parent: string | null
  line: number
  params: string[]
  locals: string[]
  /** [name without a leading ::, whether written $::name, line, column, whether Puppet may skip it (see each_branch)]: the first read of each, one Puppet cannot skip if there is one. */
  refs: Array<[string, boolean, number, number, boolean]>
  /** The classes and defines it declares by a literal name (lower case, no leading ::), each with whether Puppet may skip every declaration of it. */
  uses: Array<[string, boolean]>
}

/** One manifest's classes and defines, and the names it assigns outside them (top scope, node bodies). */
export interface FileScopes {
  definitions: DefinitionScope[]
  top: string[]
  /** The classes and defines its top-scope code declares (see DefinitionScope.uses). */
  uses: Array<[string, boolean]>
}

/** Facter's fact names (see facter_names in VARIABLE_SCOPES); legacy names map to the structured fact they stand for. */
export interface FacterNames {
  core: string[]
  legacy: Record<string, string | null>
  /** Puppet's include_legacy_facts: false on Puppet 8 and OpenVox, which no longer collect them. */
  include_legacy: boolean
}
