export async function greet(name: string): Promise<string> {
  return `hello, ${name}`;
}
