#!/usr/bin/env node
// Regenerates gencoord_env/data/minecraft_items.json: the item names of Minecraft Java 1.21.4.
//
// The list is committed so that the Python package needs no Node at run time; this script is the only
// way it should change. minecraft-data is resolved from the current directory, so install it in a
// scratch directory first:
//
//   cd "$(mktemp -d)" && npm install minecraft-data@3.119.0
//   node <repo>/scripts/extract_minecraft_items.js > <repo>/gencoord_env/data/minecraft_items.json
'use strict'

const MINECRAFT_VERSION = '1.21.4'

const packageDir = require.resolve('minecraft-data', { paths: [process.cwd()] })
const minecraftData = require(packageDir)
const packageVersion = require(require.resolve('minecraft-data/package.json', { paths: [process.cwd()] })).version

const data = minecraftData(MINECRAFT_VERSION)
if (!data) {
  throw new Error(`minecraft-data ${packageVersion} has no data for ${MINECRAFT_VERSION}; install a newer version`)
}
const items = [...new Set(data.itemsArray.map((item) => item.name))].sort()
const record = {
  minecraft_version: MINECRAFT_VERSION,
  source: `minecraft-data@${packageVersion}`,
  items
}
// One name per line keeps diffs between versions readable.
const lines = JSON.stringify(record, null, 2)
process.stdout.write(lines + '\n')
