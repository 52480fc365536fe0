-- The append-only tables refused UPDATE and DELETE row by row, but TRUNCATE
-- fires no row triggers: it would have emptied them without a word. A
-- statement trigger refuses it as well.

CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION refuse_change();
CREATE TRIGGER decisions_no_truncate BEFORE TRUNCATE ON decisions
    FOR EACH STATEMENT EXECUTE FUNCTION refuse_change();
CREATE TRIGGER run_reports_no_truncate BEFORE TRUNCATE ON run_reports
    FOR EACH STATEMENT EXECUTE FUNCTION refuse_change();
