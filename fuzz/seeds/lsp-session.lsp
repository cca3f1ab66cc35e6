{"jsonrpc": "2.0", "method": "initialized", "params": {}}
{"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {"uri": "file:///p.yaml", "languageId": "yaml", "version": 1, "text": "apiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy\nmetadata:\n  name: web\n  namespace: default\nspec:\n  endpointSelector:\n    matchLabels:\n      app: web\n  ingress:\n  - fromEndpoint:\n    - matchLabels:\n        app: x\n    toPorts:\n    - ports:\n      - port: 8080\n        protocol: tcp\n"}}}
{"jsonrpc": "2.0", "id": 1, "method": "textDocument/hover", "params": {"textDocument": {"uri": "file:///p.yaml"}, "position": {"line": 16, "character": 10}}}
{"jsonrpc": "2.0", "id": 2, "method": "textDocument/completion", "params": {"textDocument": {"uri": "file:///p.yaml"}, "position": {"line": 16, "character": 18}}}
{"jsonrpc": "2.0", "id": 3, "method": "textDocument/codeAction", "params": {"textDocument": {"uri": "file:///p.yaml"}, "range": {"start": {"line": 15, "character": 15}, "end": {"line": 15, "character": 15}}, "context": {"diagnostics": []}}}
{"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {"textDocument": {"uri": "file:///p.yaml", "version": 2}, "contentChanges": [{"range": {"start": {"line": 15, "character": 14}, "end": {"line": 15, "character": 18}}, "text": "\"8080\""}]}}
{"jsonrpc": "2.0", "id": 4, "method": "shutdown"}
{"jsonrpc": "2.0", "method": "exit"}
