-- The observation ledger of each cluster and namespace, and the archive receipts.

-- One row per cluster and namespace: the ledger's JSON text exactly as it was written
-- (`{uid: {"first": number, "name": name}}`). TEXT, not JSONB: JSONB would reformat it.
CREATE TABLE gc_ledgers (
    cluster_id TEXT        NOT NULL,
    namespace  TEXT        NOT NULL,
    ledger     TEXT        NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (cluster_id, namespace)
);

-- One row per archived Pod: where its archive is and the archive's digest and size.
CREATE TABLE gc_receipts (
    cluster_id TEXT        NOT NULL,
    uid        TEXT        NOT NULL,
    namespace  TEXT        NOT NULL,
    name       TEXT        NOT NULL,
    uri        TEXT        NOT NULL,
    sha256     TEXT        NOT NULL,
    bytes      BIGINT      NOT NULL CHECK (bytes >= 0),
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (cluster_id, uid)
);
