from tui.app import main

raise SystemExit(main())
