/** The console's views: one entry each (see router.tsx). */
import type { ViewRoute } from './router.js';
import { ApprovalsView } from './views/approvals.js';
import { ConversationsView } from './views/conversations.js';
import { TurnView } from './views/turn.js';
import { TurnsView } from './views/turns.js';

export const routes: readonly ViewRoute[] = [
  { path: '/', title: 'Turns', view: TurnsView },
  { path: '/turns', title: 'Turns', view: TurnsView, nav: 'Turns' },
  { path: '/conversations', title: 'Conversations', view: ConversationsView, nav: 'Conversations' },
  { path: '/approvals', title: 'Approvals', view: ApprovalsView, nav: 'Approvals' },
  { path: '/turns/:id', title: 'Turn', view: TurnView },
];
