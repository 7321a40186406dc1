import { proxyActivities } from '@temporalio/workflow';

const { greet } = proxyActivities<{ greet(name: string): Promise<string> }>({
  startToCloseTimeout: '30 seconds',
});

export async function smokeWorkflow(name: string): Promise<string> {
  return greet(name);
}
