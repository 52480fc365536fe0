-- Where a lab host lets tests write: scratch directories, and files or
-- block devices by their own path (acceptance.WritePlaces). A host that
-- declares none lets fio steps only read files that exist; hosts
-- registered before this migration declare none until an engineer says.
ALTER TABLE hosts ADD COLUMN write_places text[] NOT NULL DEFAULT '{}';
