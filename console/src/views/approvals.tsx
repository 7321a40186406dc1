import { useState } from 'react';
import type { ConsoleApproval } from '../api.js';
import { api } from '../api.js';
import { formatTime, principalText } from '../format.js';
import { useResource } from '../hooks.js';
import { Json, Loading, TurnLink } from './common.js';

/** What became of a decision sent from this page. */
export interface Decision {
  action: 'approve' | 'reject';
  at: string;
  reason?: string;
}

/**
 * Approve or reject one call. Once decided the card stays, without its buttons, and says what
 * was decided (the call leaves the list of open ones; the person should see that it went).
 */
export function ApprovalCard({
  approval,
  onDecided,
  decided,
}: {
  approval: ConsoleApproval;
  onDecided: (decision: Decision) => void;
  decided?: Decision;
}) {
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
      setMessage(null);
      onDecided({
        action,
        at: new Date().toISOString(),
        ...(action === 'reject' && reason ? { reason } : {}),
      });
    } catch (error) {
      setMessage(`Refused: ${(error as Error).message}`);
    } finally {
      setBusy(false);
    }
  };
  const id = `approval-${approval.toolCallId}`;
  return (
    <article className={`card approval${decided ? ' decided' : ''}`} aria-labelledby={id}>
      <h2 id={id}>
        <code>{approval.toolName}</code> in <TurnLink id={approval.turnId}>{approval.agentName}</TurnLink>
      </h2>
      <p className="meta">
        call {approval.toolCallId} · requested {formatTime(approval.requestedAt)}
        {approval.principal !== null ? <> · for {principalText(approval.principal)}</> : null}
        {approval.rootTurnId !== approval.turnId ? (
          <>
            {' '}
            · run <TurnLink id={approval.rootTurnId} />
          </>
        ) : null}
      </p>
      <Json value={approval.arguments} />
      {decided ? (
        <p role="status" className={`decision decision-${decided.action}`}>
          {decided.action === 'approve'
            ? `Approved at ${formatTime(decided.at)}: the tool runs now.`
            : `Rejected at ${formatTime(decided.at)}${decided.reason ? `: ${decided.reason}` : ''}. The agent is told.`}{' '}
          <TurnLink id={approval.turnId}>Follow the turn</TurnLink>
        </p>
      ) : (
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
      )}
      {message ? <p role="status">{message}</p> : null}
    </article>
  );
}

const keyOf = (approval: ConsoleApproval) => `${approval.turnId}:${approval.toolCallId}`;

export function ApprovalsView() {
  const list = useResource('approvals', api.approvals, () => 3_000);
  // Decisions made here, with their cards, kept after the call leaves the open list.
  const [decided, setDecided] = useState<Map<string, { approval: ConsoleApproval; decision: Decision }>>(
    () => new Map(),
  );
  const open = (list.data?.approvals ?? []).filter((approval) => !decided.has(keyOf(approval)));
  const record = (approval: ConsoleApproval) => (decision: Decision) => {
    setDecided((before) => new Map(before).set(keyOf(approval), { approval, decision }));
    list.reload();
  };
  return (
    <section aria-labelledby="approvals-title">
      <h1 id="approvals-title">Pending approvals</h1>
      {!list.data ? (
        <Loading error={list.error} what="approvals" />
      ) : open.length === 0 ? (
        <p>No call is awaiting a decision.</p>
      ) : (
        open.map((approval) => (
          <ApprovalCard key={keyOf(approval)} approval={approval} onDecided={record(approval)} />
        ))
      )}
      {list.data?.nextCursor ? (
        <p className="meta">More calls are waiting: decide these first, or follow each turn from the list.</p>
      ) : null}
      {decided.size > 0 ? (
        <section aria-labelledby="decided-title">
          <h2 id="decided-title">Decided here</h2>
          {[...decided.values()].reverse().map(({ approval, decision }) => (
            <ApprovalCard
              key={keyOf(approval)}
              approval={approval}
              onDecided={() => undefined}
              decided={decision}
            />
          ))}
        </section>
      ) : null}
    </section>
  );
}
