package store

// Test-only access to the migrator with another set of files.
var (
	MigrateFS = migrateFS
	StatusFS  = statusFS
)
