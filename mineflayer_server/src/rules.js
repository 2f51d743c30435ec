'use strict'
// The rule tables this sidecar shares with the Python package, read from the directory the sidecar is
// given (`--rules DIR`, the package's `gencoord_env/data`): `limits.json`, the limits shared with the
// Python package (its `args` bound the types of the op table, the same numbers the Python contract
// rejects agent input by), `skill_ops.json`, the skill-call ops and the types of their arguments,
// against which every call is checked (skills.js), and `recipes.json`, the game rules whose smelting and
// fuels the furnace plugin runs (plugin/furnace.js). Both worlds read these same files, so the Python
// world and this one cannot disagree about them. Nothing here guesses where the files are.

const fs = require('fs')
const path = require('path')

const ARG_KINDS = Object.freeze(['string', 'int', 'item'])
/** Vanilla game ticks one item takes to smelt; recipes.json counts fuel in items smelted per fuel item. */
const COOK_TICKS = 200

/** A rule table is missing or malformed; the message names the file and the entry to fix. */
class RulesError extends Error {
  constructor (message) {
    super(message)
    this.name = 'RulesError'
  }
}

const isObject = v => v !== null && typeof v === 'object' && !Array.isArray(v)
const isCount = v => Number.isInteger(v) && v >= 1

function readTable (dir, name) {
  const file = path.join(dir, name)
  let text
  try {
    text = fs.readFileSync(file, 'utf8')
  } catch (err) {
    throw new RulesError(`rule table ${file} cannot be read (${err.code || err.message}); --rules must name ` +
      "the directory of limits.json, skill_ops.json and recipes.json (the Python package's gencoord_env/data)")
  }
  try {
    return JSON.parse(text)
  } catch (err) {
    throw new RulesError(`rule table ${file} is not valid JSON: ${err.message}`)
  }
}

/**
 * `limits.json` -> `{args: {name: {min, max}}, ...other sections as they are}`. Only `args` is checked
 * here (the op table reads it); the other sections belong to the modules that read them.
 */
function parseLimits (raw, where = 'limits.json') {
  if (!isObject(raw) || !isObject(raw.args)) throw new RulesError(`${where}: expected an object with the object "args"`)
  const args = {}
  for (const [name, l] of Object.entries(raw.args)) {
    if (!isObject(l) || !Number.isInteger(l.min) || !Number.isInteger(l.max) || l.min < 0 || l.min > l.max) {
      throw new RulesError(`${where}: args.${name} needs integers 0 <= min <= max, got ${JSON.stringify(l)}`)
    }
    args[name] = Object.freeze({ min: l.min, max: l.max })
  }
  return Object.freeze({ ...raw, args: Object.freeze(args) })
}

/**
 * `skill_ops.json` -> `{op: {arg: {name, kind, min, max}}}`, arguments in call order. A type's `limit`
 * names the entry of `limits.args` that gives its min and max; a min or max of its own overrides it.
 */
function parseOps (raw, where = 'skill_ops.json', limits = { args: {} }) {
  if (!isObject(raw) || !isObject(raw.types) || !isObject(raw.ops)) throw new RulesError(`${where}: expected an object with the objects "types" and "ops"`)
  const types = {}
  for (const [name, t] of Object.entries(raw.types)) {
    if (!isObject(t) || !ARG_KINDS.includes(t.kind)) throw new RulesError(`${where}: types.${name} needs a kind, one of ${ARG_KINDS.join(', ')}`)
    if (t.limit !== undefined && !Object.hasOwn(limits.args, t.limit)) {
      throw new RulesError(`${where}: types.${name}.limit ${JSON.stringify(t.limit)} is not a limit of limits.json's args; limits are ${Object.keys(limits.args).join(', ')}`)
    }
    const bound = t.limit === undefined ? {} : limits.args[t.limit]
    const [min, max] = [t.min ?? bound.min, t.max ?? bound.max]
    if (!Number.isInteger(min) || !Number.isInteger(max) || min < 0 || min > max) {
      throw new RulesError(`${where}: types.${name} needs integers 0 <= min <= max, got min ${JSON.stringify(t.min)} and max ${JSON.stringify(t.max)}`)
    }
    types[name] = Object.freeze({ name, kind: t.kind, min, max })
  }
  const ops = {}
  for (const [op, entry] of Object.entries(raw.ops)) {
    if (!isObject(entry) || !isObject(entry.args)) throw new RulesError(`${where}: ops.${op} needs an object "args" (argument name -> type name)`)
    const args = {}
    for (const [arg, typeName] of Object.entries(entry.args)) {
      if (!Object.hasOwn(types, typeName)) throw new RulesError(`${where}: ops.${op}.args.${arg} has unknown type ${JSON.stringify(typeName)}; types are ${Object.keys(types).join(', ')}`)
      args[arg] = types[typeName]
    }
    ops[op] = Object.freeze(args)
  }
  return Object.freeze(ops)
}

/**
 * `recipes.json` -> `{crafting, smelting, fuels, fuelTicks, blocks, stack}`: `fuels` as the table has them
 * (items smelted per fuel item), `fuelTicks` the same as vanilla burn ticks (COOK_TICKS per item smelted).
 */
function parseRecipes (raw, where = 'recipes.json') {
  if (!isObject(raw)) throw new RulesError(`${where}: expected a JSON object`)
  for (const key of ['crafting', 'smelting', 'fuels', 'blocks', 'stack']) {
    if (!Object.hasOwn(raw, key)) throw new RulesError(`${where}: no "${key}" section; expected crafting, smelting, fuels, blocks and stack`)
  }
  for (const [output, r] of Object.entries(raw.crafting)) {
    if (!isObject(r) || !isCount(r.count) || !isObject(r.inputs) || typeof r.table !== 'boolean' ||
        !Object.values(r.inputs).every(isCount) || !Object.keys(r.inputs).length) {
      throw new RulesError(`${where}: crafting.${output} needs {count: int >= 1, inputs: {item: int >= 1}, table: true|false}`)
    }
  }
  for (const [input, output] of Object.entries(raw.smelting)) {
    if (typeof output !== 'string' || !output) throw new RulesError(`${where}: smelting.${input} must name the output item`)
  }
  const fuelTicks = {}
  for (const [item, smelts] of Object.entries(raw.fuels)) {
    const ticks = typeof smelts === 'number' ? smelts * COOK_TICKS : NaN
    if (!(ticks > 0) || Math.abs(ticks - Math.round(ticks)) > 1e-9) {
      throw new RulesError(`${where}: fuels.${item} must be the items smelted per fuel item, a positive multiple of 1/${COOK_TICKS}; got ${JSON.stringify(smelts)}`)
    }
    fuelTicks[item] = Math.round(ticks)
  }
  if (!Array.isArray(raw.blocks) || !raw.blocks.every(b => typeof b === 'string')) throw new RulesError(`${where}: blocks must be a list of item names`)
  for (const [item, n] of Object.entries(raw.stack)) {
    if (!isCount(n)) throw new RulesError(`${where}: stack.${item} must be an int >= 1, got ${JSON.stringify(n)}`)
  }
  return Object.freeze({
    crafting: raw.crafting,
    smelting: Object.freeze({ ...raw.smelting }),
    fuels: Object.freeze({ ...raw.fuels }),
    fuelTicks: Object.freeze(fuelTicks),
    blocks: Object.freeze([...raw.blocks]),
    stack: Object.freeze({ ...raw.stack })
  })
}

/** Read the tables from `dir`: `{dir, limits, ops, recipes}`. Throws RulesError saying what to fix. */
function loadRules (dir) {
  if (typeof dir !== 'string' || !dir) {
    throw new RulesError("no rules directory: pass the directory of skill_ops.json and recipes.json (the Python package's gencoord_env/data)")
  }
  const abs = path.resolve(dir)
  const limits = parseLimits(readTable(abs, 'limits.json'), path.join(abs, 'limits.json'))
  return Object.freeze({
    dir: abs,
    limits,
    ops: parseOps(readTable(abs, 'skill_ops.json'), path.join(abs, 'skill_ops.json'), limits),
    recipes: parseRecipes(readTable(abs, 'recipes.json'), path.join(abs, 'recipes.json'))
  })
}

module.exports = { loadRules, parseLimits, parseOps, parseRecipes, RulesError, COOK_TICKS }
