package sqlite

import (
	"context"
	"strings"

	"github.com/stepgraph/stepgraph/internal/store"
)

const deploymentColumns = `id, org_id, name, status, latest_revision_id, active_revision_id,
	doc, version, created_at, updated_at`

const revisionColumns = `id, org_id, deployment_id, status, status_reason, doc, version,
	created_at, updated_at`

func scanDeployment(s scanner) (store.Deployment, error) {
	var d store.Deployment
	var created, updated int64
	err := s.Scan(&d.ID, &d.OrgID, &d.Name, &d.Status, &d.LatestRevisionID, &d.ActiveRevisionID,
		&d.Doc, &d.Version, &created, &updated)
	if err != nil {
		return store.Deployment{}, err
	}
	d.CreatedAt, d.UpdatedAt = fromMicros(created), fromMicros(updated)
	return d, nil
}

func scanRevision(s scanner) (store.Revision, error) {
	var r store.Revision
	var created, updated int64
	err := s.Scan(&r.ID, &r.OrgID, &r.DeploymentID, &r.Status, &r.StatusReason, &r.Doc, &r.Version,
		&created, &updated)
	if err != nil {
		return store.Revision{}, err
	}
	r.CreatedAt, r.UpdatedAt = fromMicros(created), fromMicros(updated)
	return r, nil
}

// CreateDeployment implements store.Deployments. The first revision is stored
// under d's OrgID and ID whatever its own fields say; both Versions start at 1.
func (db *DB) CreateDeployment(ctx context.Context, d store.Deployment, first store.Revision) error {
	return db.inTx(ctx, func(tx *txn) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO deployments (`+deploymentColumns+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?, ?)`,
			d.ID, d.OrgID, d.Name, d.Status, d.LatestRevisionID, d.ActiveRevisionID,
			d.Doc, micros(d.CreatedAt), micros(d.UpdatedAt))
		if err != nil {
			return mapErr("create deployment", err)
		}
		return insertRevision(ctx, tx, d, first)
	})
}

// insertRevision stores r as a new revision (Version 1) of deployment d.
func insertRevision(ctx context.Context, tx *txn, d store.Deployment, r store.Revision) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO revisions (`+revisionColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?)`,
		r.ID, d.OrgID, d.ID, r.Status, r.StatusReason, r.Doc,
		micros(r.CreatedAt), micros(r.UpdatedAt))
	return mapErr("create revision", err)
}

// Deployment implements store.Deployments.
func (db *DB) Deployment(ctx context.Context, orgID, id string) (store.Deployment, error) {
	return getDeployment(ctx, db.reads(), orgID, id)
}

func getDeployment(ctx context.Context, q queryer, orgID, id string) (store.Deployment, error) {
	d, err := scanDeployment(q.QueryRowContext(ctx,
		`SELECT `+deploymentColumns+` FROM deployments WHERE id = ? AND org_id = ?`, id, orgID))
	if err != nil {
		return store.Deployment{}, mapErr("deployment", err)
	}
	return d, nil
}

// ListDeployments implements store.Deployments: newest first, ties broken by
// insertion order (the later insert first).
func (db *DB) ListDeployments(ctx context.Context, orgID string, f store.DeploymentFilter) ([]store.Deployment, error) {
	where := []string{"org_id = ?"}
	args := []any{orgID}
	if f.NameContains != "" {
		where = append(where, "instr(name, ?) > 0") // case-sensitive, unlike LIKE
		args = append(args, f.NameContains)
	}
	if f.Name != "" {
		where = append(where, "name = ?")
		args = append(args, f.Name)
	}
	if f.Status != "" {
		where = append(where, "status = ?")
		args = append(args, f.Status)
	}
	limit, offset := page(f.Limit, f.Offset)
	args = append(args, limit, offset)
	return queryAll(ctx, db.reads(), "list deployments", `SELECT `+deploymentColumns+` FROM deployments
		WHERE `+strings.Join(where, " AND ")+`
		ORDER BY created_at DESC, seq DESC LIMIT ? OFFSET ?`, args, scanDeployment)
}

// DeploymentsInStatus implements store.Deployments: oldest first.
func (db *DB) DeploymentsInStatus(ctx context.Context, status string) ([]store.Deployment, error) {
	return queryAll(ctx, db.reads(), "list deployments", `SELECT `+deploymentColumns+` FROM deployments
		WHERE status = ? ORDER BY created_at, seq`, []any{status}, scanDeployment)
}

// UpdateDeployment implements store.Deployments. CreatedAt is kept; the other
// fields are replaced.
func (db *DB) UpdateDeployment(ctx context.Context, d store.Deployment) (store.Deployment, error) {
	var out store.Deployment
	err := db.inTx(ctx, func(tx *txn) error {
		if err := casDeployment(ctx, tx, d); err != nil {
			return err
		}
		var err error
		out, err = getDeployment(ctx, tx, d.OrgID, d.ID)
		return err
	})
	if err != nil {
		return store.Deployment{}, err
	}
	return out, nil
}

// AddRevision implements store.Deployments: the deployment write (under the
// optimistic rule) and the new revision (Version 1, under d's OrgID and ID)
// commit together or not at all.
func (db *DB) AddRevision(ctx context.Context, d store.Deployment, r store.Revision) (store.Deployment, error) {
	var out store.Deployment
	err := db.inTx(ctx, func(tx *txn) error {
		if err := casDeployment(ctx, tx, d); err != nil {
			return err
		}
		if err := insertRevision(ctx, tx, d, r); err != nil {
			return err
		}
		var err error
		out, err = getDeployment(ctx, tx, d.OrgID, d.ID)
		return err
	})
	if err != nil {
		return store.Deployment{}, err
	}
	return out, nil
}

// casDeployment writes d if the stored Version is d.Version.
func casDeployment(ctx context.Context, tx *txn, d store.Deployment) error {
	res, err := tx.ExecContext(ctx, `UPDATE deployments SET
		name = ?, status = ?, latest_revision_id = ?, active_revision_id = ?, doc = ?,
		updated_at = ?, version = version + 1
		WHERE id = ? AND org_id = ? AND version = ?`,
		d.Name, d.Status, d.LatestRevisionID, d.ActiveRevisionID, d.Doc, micros(d.UpdatedAt),
		d.ID, d.OrgID, d.Version)
	if err != nil {
		return mapErr("update deployment", err)
	}
	n, err := affected("update deployment", res)
	if err != nil {
		return err
	}
	if n == 1 {
		return nil
	}
	return missingOrStale(ctx, tx, `SELECT 1 FROM deployments WHERE id = ? AND org_id = ?`, d.ID, d.OrgID)
}

// missingOrStale explains a compare-and-set that changed nothing: the record
// is missing (ErrNotFound) or has another Version (ErrStale).
func missingOrStale(ctx context.Context, q queryer, exists string, args ...any) error {
	var one int
	err := q.QueryRowContext(ctx, exists, args...).Scan(&one)
	if err != nil {
		return mapErr("check version", err)
	}
	return store.ErrStale
}

// DeleteDeployment implements store.Deployments.
func (db *DB) DeleteDeployment(ctx context.Context, orgID, id string) error {
	return db.inTx(ctx, func(tx *txn) error {
		// ON DELETE CASCADE would do; deleting explicitly keeps the rule
		// independent of the foreign_keys pragma.
		if _, err := tx.ExecContext(ctx,
			`DELETE FROM revisions WHERE deployment_id = ? AND org_id = ?`, id, orgID); err != nil {
			return mapErr("delete revisions", err)
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM deployments WHERE id = ? AND org_id = ?`, id, orgID)
		if err != nil {
			return mapErr("delete deployment", err)
		}
		n, err := affected("delete deployment", res)
		if err != nil {
			return err
		}
		if n == 0 {
			return store.ErrNotFound
		}
		return nil
	})
}

// Revision implements store.Deployments.
func (db *DB) Revision(ctx context.Context, orgID, deploymentID, id string) (store.Revision, error) {
	return getRevision(ctx, db.reads(), orgID, deploymentID, id)
}

func getRevision(ctx context.Context, q queryer, orgID, deploymentID, id string) (store.Revision, error) {
	r, err := scanRevision(q.QueryRowContext(ctx, `SELECT `+revisionColumns+` FROM revisions
		WHERE id = ? AND org_id = ? AND deployment_id = ?`, id, orgID, deploymentID))
	if err != nil {
		return store.Revision{}, mapErr("revision", err)
	}
	return r, nil
}

// ListRevisions implements store.Deployments: newest first, ties broken by
// insertion order (the later insert first).
func (db *DB) ListRevisions(ctx context.Context, orgID, deploymentID string, f store.RevisionFilter) ([]store.Revision, error) {
	var one int
	err := db.reads().QueryRowContext(ctx,
		`SELECT 1 FROM deployments WHERE id = ? AND org_id = ?`, deploymentID, orgID).Scan(&one)
	if err != nil {
		return nil, mapErr("list revisions", err)
	}
	where := "deployment_id = ? AND org_id = ?"
	args := []any{deploymentID, orgID}
	if len(f.Statuses) > 0 {
		where += " AND status IN (" + placeholders(len(f.Statuses)) + ")"
		for _, s := range f.Statuses {
			args = append(args, s)
		}
	}
	limit, offset := page(f.Limit, f.Offset)
	args = append(args, limit, offset)
	return queryAll(ctx, db.reads(), "list revisions", `SELECT `+revisionColumns+` FROM revisions WHERE `+where+`
		ORDER BY created_at DESC, seq DESC LIMIT ? OFFSET ?`, args, scanRevision)
}

// UnsettledRevisions implements store.Deployments: oldest first. No statuses
// match nothing.
func (db *DB) UnsettledRevisions(ctx context.Context, statuses []string) ([]store.Revision, error) {
	if len(statuses) == 0 {
		return []store.Revision{}, nil
	}
	args := make([]any, len(statuses))
	for i, s := range statuses {
		args[i] = s
	}
	return queryAll(ctx, db.reads(), "list revisions", `SELECT `+revisionColumns+` FROM revisions
		WHERE status IN (`+placeholders(len(statuses))+`) ORDER BY created_at, seq`, args, scanRevision)
}

// UpdateRevision implements store.Deployments. Status, StatusReason, Doc and
// UpdatedAt are replaced; the revision is found by (OrgID, DeploymentID, ID).
func (db *DB) UpdateRevision(ctx context.Context, r store.Revision) (store.Revision, error) {
	var out store.Revision
	err := db.inTx(ctx, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, `UPDATE revisions SET
			status = ?, status_reason = ?, doc = ?, updated_at = ?, version = version + 1
			WHERE id = ? AND org_id = ? AND deployment_id = ? AND version = ?`,
			r.Status, r.StatusReason, r.Doc, micros(r.UpdatedAt),
			r.ID, r.OrgID, r.DeploymentID, r.Version)
		if err != nil {
			return mapErr("update revision", err)
		}
		n, err := affected("update revision", res)
		if err != nil {
			return err
		}
		if n != 1 {
			return missingOrStale(ctx, tx,
				`SELECT 1 FROM revisions WHERE id = ? AND org_id = ? AND deployment_id = ?`,
				r.ID, r.OrgID, r.DeploymentID)
		}
		out, err = getRevision(ctx, tx, r.OrgID, r.DeploymentID, r.ID)
		return err
	})
	if err != nil {
		return store.Revision{}, err
	}
	return out, nil
}
