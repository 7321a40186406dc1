import { useState } from 'react';
import type { ConsoleApproval } from '../api.js';
import { api } from '../api.js';
import { formatTime } from '../format.js';
import { useResource } from '../hooks.js';
import { Json, Loading, TurnLink } from './common.js';

/** Approve or reject one call; the answer (or the refusal) is announced. */
export function ApprovalCard({ approval, onDecided }: { approval: ConsoleApproval; onDecided: () => void }) {
  const [reason, setReason] = useState('');
  const [message, setMessage] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const decide = async (action: 'approve' | 'reject') => {
    setBusy(true);
    try {
      await api.control(approval.turnId, action, {
        toolCallId: approval.toolCallId,
        ...(action === 'reject' && reason ? { reason } : {}),
      });
      setMessage(action === 'approve' ? 'Approved' : 'Rejected');
      onDecided();
    } catch (error) {
      setMessage(`Refused: ${(error as Error).message}`);
    } finally {
      setBusy(false);
    }
  };
  const id = `approval-${approval.toolCallId}`;
  return (
    <article className="card approval" aria-labelledby={id}>
      <h2 id={id}>
        <code>{approval.toolName}</code> in <TurnLink id={approval.turnId}>{approval.agentName}</TurnLink>
      </h2>
      <p className="meta">
        call {approval.toolCallId} · requested {formatTime(approval.requestedAt)}
        {approval.rootTurnId !== approval.turnId ? (
          <>
            {' '}
            · run <TurnLink id={approval.rootTurnId} />
          </>
        ) : null}
      </p>
      <Json value={approval.arguments} />
      <div className="actions">
        <button type="button" disabled={busy} onClick={() => void decide('approve')}>
          Approve
        </button>
        <label>
          Reason <input value={reason} onChange={(e) => setReason(e.target.value)} />
        </label>
        <button type="button" className="danger" disabled={busy} onClick={() => void decide('reject')}>
          Reject
        </button>
      </div>
      {message ? <p role="status">{message}</p> : null}
    </article>
  );
}

export function ApprovalsView() {
  const list = useResource('approvals', api.approvals, () => 3_000);
  return (
    <section aria-labelledby="approvals-title">
      <h1 id="approvals-title">Pending approvals</h1>
      {!list.data ? (
        <Loading error={list.error} what="approvals" />
      ) : list.data.approvals.length === 0 ? (
        <p>No call is awaiting a decision.</p>
      ) : (
        list.data.approvals.map((approval) => (
          <ApprovalCard
            key={`${approval.turnId}:${approval.toolCallId}`}
            approval={approval}
            onDecided={list.reload}
          />
        ))
      )}
    </section>
  );
}
