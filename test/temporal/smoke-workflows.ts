import { proxyActivities } from '@temporalio/workflow';
import type * as activities from './smoke-activities.js';

const { greet } = proxyActivities<typeof activities>({ startToCloseTimeout: '30 seconds' });

export async function smokeWorkflow(name: string): Promise<string> {
  return greet(name);
}
