// Package migrations holds Accord's schema as numbered SQL files
// (NNNN_name.sql), embedded into the binary and applied in order by
// store.Migrate, each in its own transaction. River's own tables are applied
// separately through rivermigrate.
//
// An applied file must never change: its checksum is recorded and checked.
// To change the schema, add a new file.
package migrations

import "embed"

// FS contains the SQL files.
//
//go:embed *.sql
var FS embed.FS
