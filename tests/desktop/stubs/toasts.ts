// Stand-in for goose Desktop's `src/toasts.tsx` (react-toastify UI). The harness records what
// Desktop would have shown, so a step can report an error toast instead of it vanishing.
export type ExtensionLoadingStatus = { name: string; status: string; error?: string };

export const shownToasts: { kind: string; detail: unknown }[] = [];

const record = (kind: string) => (detail: unknown) => {
  shownToasts.push({ kind, detail });
  return kind;
};

export const toastService = {
  configure: () => {},
  error: record('error'),
  success: record('success'),
  loading: record('loading'),
  dismiss: () => {},
  extensionLoading: (statuses: ExtensionLoadingStatus[], total: number, done: boolean) =>
    shownToasts.push({ kind: 'extensionLoading', detail: { statuses, total, done } }),
};

export const toastSuccess = record('success');
export const toastError = record('error');
export const toastLoading = record('loading');
export const toastInfo = record('info');
