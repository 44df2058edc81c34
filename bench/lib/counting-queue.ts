/** For the bench Workers: the step queue, telling `counted` how many messages went through it (the real queue delivers them). */
export function countingQueue(queue: Env["QUEUE"], counted: (messages: number) => void): Env["QUEUE"] {
  return {
    send: (body, options) => {
      counted(1);
      return queue.send(body, options);
    },
    sendBatch: (messages, options) => {
      const list = [...messages];
      counted(list.length);
      return queue.sendBatch(list, options);
    },
    metrics: () => queue.metrics(),
  } as Env["QUEUE"];
}
