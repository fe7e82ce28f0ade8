-- StreamSpace's sessions table as its API creates it at start (api/internal/db/database.go): the
-- columns gc and StreamSpace's reconciler read and write; the state has no constraint.
CREATE TABLE sessions (
  id VARCHAR(255) PRIMARY KEY,
  user_id VARCHAR(255),
  template_name VARCHAR(255),
  state VARCHAR(50) NOT NULL DEFAULT 'pending',
  agent_id VARCHAR(255),
  cluster_id VARCHAR(255),
  namespace VARCHAR(255) DEFAULT 'streamspace',
  termination_reason TEXT,
  terminated_at TIMESTAMP,
  created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
  updated_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP
);
CREATE INDEX idx_sessions_state ON sessions(state);
